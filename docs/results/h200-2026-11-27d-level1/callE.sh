set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s); B=${BUDGET:-540}
left() { echo $(( B - ($(date +%s) - T0) )); }
bench() { # gpu suite policy out extra...
  local g=$1 s=$2 p=$3 o=$4; shift 4
  ( export CUDA_VISIBLE_DEVICES=$g KFORGE_LOCK_JOURNAL=$R/locks-$o.txt
    timeout --signal=INT --kill-after=15 $(left) python -m kforge_search bench out/kb/$s --platform cuda-triton --policy $p --budget 2 --jobs 4 --resume --out $R/$o "$@" >> $R/$o.log 2>&1 ) ; }
thr() { # gpu tag extra...
  local g=$1 t=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$g KFORGE_LOCK_JOURNAL=$R/locks-$t.txt
    timeout --signal=INT --kill-after=20 $(( $(left) - 25 )) python -m kforge_search bench --throughput --platform cuda-triton --duration ${DUR:-7} --out $R/$t "$@" > $R/$t.log 2>&1 ) ; }
thr 0 thr8 &
thr 1 thr16 --per-gpu 16 &
( bench 2 selH strict strict; bench 2 selL3 loose loose ) &
( export CUDA_VISIBLE_DEVICES=3; timeout $(( $(left) - 15 )) python -m pytest -q -m gpu tests/agents/builtin tests/evaluator -p no:cacheprovider > $R/gputest.txt 2>&1
  timeout $(( $(left) - 10 )) python out/kb/tiles.py f > $R/tiles-f.jsonl 2> $R/tiles-f.err ) &
pids="$(jobs -p)"
( while true; do echo "t=$(( $(date +%s) - T0 ))"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; uptime; sleep 15; done >> $R/mon.txt 2>&1 ) &
mon=$!; wait $pids; kill $mon

tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
tar cf $OUT/kfc.tar --exclude=./references --exclude=./triton --exclude=./torch_extensions --exclude=./pycache -C /tmp/kfc .
ls -la $OUT
