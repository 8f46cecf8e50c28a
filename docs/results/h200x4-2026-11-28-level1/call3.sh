# NVML in a fork; level 1 strict's rest (GPUs 0-2); the rows this session's kernels change, strict then loose (GPU 3)
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
for m in keep release; do CUDA_VISIBLE_DEVICES=0 timeout 60 python out/kb/nvml_fork.py $m >> $R/nvml.txt 2>&1; done
T=${T:-440}
( while sleep 10; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo; done > $R/gpumem.txt ) &
MON=$!; PIDS=()
B="python -m kforge_search bench --platform cuda-triton --budget 2 --jobs 3"
for i in 0 1 2; do
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T $B out/kb/level1_nc --policy strict --rest-of out/kb/prev_strict2 --shard $i/3 --out $R/strict$i > $R/strict$i.log 2>&1 ) &
  PIDS+=($!)
done
( export CUDA_VISIBLE_DEVICES=3 KFORGE_CACHE_DIR=/tmp/kfc3
  timeout --signal=INT --kill-after=20 $((T/2)) $B out/kb/sel_new --policy strict --out $R/new-strict > $R/new-strict.log 2>&1
  timeout --signal=INT --kill-after=20 $((T/2)) $B out/kb/sel_new --policy loose --out $R/new-loose > $R/new-loose.log 2>&1 ) &
PIDS+=($!)
wait "${PIDS[@]}"; kill $MON
python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy strict --rest-of out/kb/prev_strict2 --merge $R/strict0 --merge $R/strict1 --merge $R/strict2 --out $R/strict > $R/strict-merge.log 2>&1
python scripts/level1_figures.py $R/strict/bench.json > $R/strict-fig.txt 2>&1
for i in 0 1 2; do rm -rf $R/strict$i/best; done
cd $OUT && tar czf r.tgz r
