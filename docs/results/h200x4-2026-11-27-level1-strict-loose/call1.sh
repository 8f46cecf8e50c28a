set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R; S=$R/strict
cp -r out/kb/strict $S
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s)
shard() { # gpu secs
  CUDA_VISIBLE_DEVICES=$1 timeout --signal=INT --kill-after=20 $2 python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy strict --budget 2 --jobs 4 --shard $1/4 --resume --out $S/shard$1 > $S/shard$1.log 2>&1; }
( export CUDA_VISIBLE_DEVICES=0; timeout -k 10 170 python -m pytest -q -m gpu -p no:cacheprovider tests/evaluator > $R/gputest.txt 2>&1;
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader > $R/after-tests.txt
  shard 0 $(( ${BUDGET:-520} - ($(date +%s) - T0) )) ) &
for g in 1 2 3; do shard $g ${BUDGET:-520} & done
pids="$(jobs -p)"
( for i in $(seq 1 60); do echo "t=$(( $(date +%s) - T0 ))" >> $R/gpumem.txt; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader >> $R/gpumem.txt; sleep 10; done ) &
mon=$!; wait $pids; kill $mon
m=(); for i in 0 1 2 3; do [ -f $S/shard$i/bench.json ] && m+=(--merge $S/shard$i); done
python -m kforge_search bench out/kb/level1 --platform cuda-triton --policy strict "${m[@]}" --out $S/all > $S/merge.txt 2>&1
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader > $R/end-mem.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
