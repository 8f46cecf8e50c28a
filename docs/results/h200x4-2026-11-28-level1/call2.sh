# level 1 on 4 GPUs: strict's rest (problems out/kb/prev_strict has no row for) beside loose (all 65), per GPU
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
T=${T:-480}
( while sleep 10; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo; done > $R/gpumem.txt ) &
MON=$!; PIDS=()
B="python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --budget 2"
for i in 0 1 2 3; do
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T $B --policy strict --jobs 2 --rest-of out/kb/prev_strict --shard $i/4 --out $R/strict$i > $R/strict$i.log 2>&1 ) &
  PIDS+=($!)
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T $B --policy loose --jobs 3 --shard $i/4 --out $R/loose$i > $R/loose$i.log 2>&1 ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"; kill $MON
python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy strict --rest-of out/kb/prev_strict --merge $R/strict0 --merge $R/strict1 --merge $R/strict2 --merge $R/strict3 --out $R/strict > $R/strict-merge.log 2>&1
python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy loose --merge $R/loose0 --merge $R/loose1 --merge $R/loose2 --merge $R/loose3 --out $R/loose > $R/loose-merge.log 2>&1
for P in strict loose; do python scripts/level1_figures.py $R/$P/bench.json > $R/$P-fig.txt 2>&1; for i in 0 1 2 3; do rm -rf $R/$P$i/best; done; done
cd $OUT && tar czf r.tgz r
