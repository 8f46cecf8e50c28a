set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s); B=${BUDGET:-520}
left() { echo $(( B - ($(date +%s) - T0) )); }
( export CUDA_VISIBLE_DEVICES=0; timeout $(left) python out/kb/tiles.py a > $R/tiles-a.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1; timeout $(left) python out/kb/tiles.py b > $R/tiles-b.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=2 KFORGE_LOCK_JOURNAL=$R/locks2.txt
  timeout 240 python -m pytest -q -m gpu tests/evaluator tests/agents/builtin/test_families_gpu.py -p no:cacheprovider > $R/gputest.txt 2>&1
  timeout --signal=INT --kill-after=15 $(left) python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy loose --budget 2 --jobs 4 --rest-of out/kb/l1 --shard 1/2 --resume --out $R/loose/shard1 > $R/loose1.log 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=3 KFORGE_LOCK_JOURNAL=$R/locks3.txt
  timeout --signal=INT --kill-after=15 300 python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy strict --budget 2 --jobs 4 --rest-of out/kb/s1 --resume --out $R/strict/shard0 > $R/strict0.log 2>&1
  timeout --signal=INT --kill-after=15 $(left) python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy loose --budget 2 --jobs 4 --rest-of out/kb/l1 --shard 0/2 --resume --out $R/loose/shard0 > $R/loose0.log 2>&1 ) &
pids="$(jobs -p)"
( while true; do echo "t=$(( $(date +%s) - T0 ))"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; sleep 15; done >> $R/mon.txt 2>&1 ) &
mon=$!; wait $pids; kill $mon
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader > $R/end-mem.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
