# level 2 (loose) shards at budget 16 with the unseen skip and lent evaluators; CPU and GPU use beside
set -u
export KFORGE_CACHE_DIR=/tmp/kc-fresh TRITON_CACHE_DIR=/tmp/tc-fresh  # nothing from an earlier call on this machine
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
for SH in ${SHS:-0/3 1/3}; do
  B=${B:-16}; J=${J:-16}; N=${SH%/*}
  A="problems/level2 --platform cuda-triton --policy loose --budget $B --jobs $J --shard $SH --out $OUT/r/s$N"
  echo "python -m kforge_search bench $A" >> $OUT/r/cmd.txt
  vmstat -n 5 > $OUT/r/vmstat-s$N.txt & V=$!
  nvidia-smi dmon -s u -d 5 > $OUT/r/dmon-s$N.txt 2>&1 & D=$!
  s=$(date +%s); timeout --signal=INT ${T:-270} python -m kforge_search bench $A > $OUT/r/s$N.log 2>&1; echo "shard $SH budget $B jobs $J wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
  kill $V $D 2>/dev/null
  tail -2 $OUT/r/s$N.log
done
cd $OUT && tar czf r.tgz r
