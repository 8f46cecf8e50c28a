set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R
[ -d out/kb/prev ] && cp -r out/kb/prev/. $R/
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit-${CALL:-x}.txt
T0=$(date +%s); B=${BUDGET:-540}
left() { echo $(( B - ($(date +%s) - T0) )); }
N=$(nvidia-smi -L | wc -l)
shard() { # gpu policy i n
  ( export CUDA_VISIBLE_DEVICES=$1 KFORGE_LOCK_JOURNAL=$R/locks-$2-$3.txt
    timeout --signal=INT --kill-after=15 $(left) python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy $2 --budget 2 --jobs 4 --shard $3/$4 ${REST:+--rest-of out/kb/$REST$2} --resume --out $R/$2/shard$3 >> $R/$2-$3.log 2>&1 ) ; }
if [ "${GPUTEST:-0}" = 1 ]; then
  ( export CUDA_VISIBLE_DEVICES=$((N-1)); timeout 420 python -m pytest -q -m gpu tests/evaluator tests/agents/builtin/test_families_gpu.py -p no:cacheprovider > $R/gputest-${CALL:-x}.txt 2>&1 ) &
fi
if [ $N -ge 4 ]; then
  shard 0 strict 0 2 & shard 1 strict 1 2 & shard 2 loose 0 2 &
  ( sleep 3; while pgrep -f "pytest -q -m gpu" >/dev/null; do sleep 5; done; shard 3 loose 1 2 ) &
else
  shard 0 strict 0 1 & shard 1 loose 0 1 &
fi
pids="$(jobs -p)"
( while true; do echo "t=$(( $(date +%s) - T0 ))"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; sleep 15; done >> $R/mon-${CALL:-x}.txt 2>&1 ) &
mon=$!; wait $pids; kill $mon
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
