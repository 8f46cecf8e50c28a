# level 1 (the 65 non-convolution problems) on 4 GPUs, one shard per GPU: POL=strict|loose, T=seconds
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
POL=${POL:-strict}; T=${T:-480}
( while sleep 10; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo; done > $R/gpumem.txt ) &
MON=$!; PIDS=()
for i in 0 1 2 3; do
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy $POL --budget 2 --jobs 3 --shard $i/4 --out $R/$POL$i > $R/$POL$i.log 2>&1 ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"; kill $MON
python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy $POL --merge $R/${POL}0 --merge $R/${POL}1 --merge $R/${POL}2 --merge $R/${POL}3 --out $R/$POL > $R/$POL-merge.log 2>&1
python scripts/level1_figures.py $R/$POL/bench.json > $R/$POL-fig.txt 2>&1
for i in 0 1 2 3; do rm -rf $R/$POL$i/best; done
cd $OUT && tar czf r.tgz r
