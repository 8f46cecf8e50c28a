set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R/rest $R/loose
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s); B=${BUDGET:-500}; T1=${STRICT_S:-230}
lane() { # gpu
  export CUDA_VISIBLE_DEVICES=$1 KFORGE_LOCK_JOURNAL=$R/locks$1.txt
  timeout --signal=INT --kill-after=15 $T1 python -m kforge_search bench out/kb/srest --platform cuda-triton --policy strict --budget 2 --jobs 3 --shard $1/4 --resume --out $R/rest/shard$1 > $R/rest/shard$1.log 2>&1
  left=$(( B - ($(date +%s) - T0) ))
  timeout --signal=INT --kill-after=15 $left python -m kforge_search bench out/kb/lrest --platform cuda-triton --policy loose --budget 2 --jobs 4 --shard $1/4 --resume --out $R/loose/shard$1 > $R/loose/shard$1.log 2>&1; }
for g in 0 1 2 3; do lane $g & done
pids="$(jobs -p)"
( while true; do echo "t=$(( $(date +%s) - T0 ))"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; ps -eo pid,pcpu,rss,etimes,args --sort=-pcpu | cut -c1-160 | head -12; sleep 10; done >> $R/mon.txt 2>&1 ) &
mon=$!; wait $pids; kill $mon
m=(); for i in 0 1 2 3; do [ -f $R/loose/shard$i/bench.json ] && m+=(--merge $R/loose/shard$i); done; true
python -m kforge_search bench out/kb/lrest --platform cuda-triton --policy loose "${m[@]}" --out $R/loose/all > $R/loose/merge.txt 2>&1
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader > $R/end-mem.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
