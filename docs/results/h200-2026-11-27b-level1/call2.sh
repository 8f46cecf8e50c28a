set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s); B=${BUDGET:-520}
left() { echo $(( B - ($(date +%s) - T0) )); }
( export CUDA_VISIBLE_DEVICES=0 KFORGE_LOCK_JOURNAL=$R/locks0.txt
  timeout 300 python out/kb/tiles.py a > $R/tiles-a.txt 2>&1
  timeout $(left) python -m pytest -q -m gpu tests/evaluator -p no:cacheprovider -rfE --durations=10 > $R/gputest.txt 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 KFORGE_LOCK_JOURNAL=$R/locks1.txt
  timeout 300 python out/kb/tiles.py b > $R/tiles-b.txt 2>&1
  timeout --signal=INT --kill-after=15 $(left) python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy strict --budget 2 --jobs 2 --rest-of out/kb/s2 --resume --out $R/strict/shard0 > $R/strict0.log 2>&1 ) &
pids="$(jobs -p)"
( while true; do echo "t=$(( $(date +%s) - T0 ))"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; sleep 15; done >> $R/mon.txt 2>&1 ) &
mon=$!; wait $pids; kill $mon
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader > $R/end-mem.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
