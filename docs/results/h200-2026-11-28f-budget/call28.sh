# one shard of level 2 (loose) at budget 16 with more jobs, CPU and GPU use sampled beside it
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
for BJ in ${BJS:-16:16 16:24}; do
  B=${BJ%:*}; J=${BJ#*:}
  A="problems/level2 --platform cuda-triton --policy loose --budget $B --jobs $J --shard ${SH:-0/3} --out $OUT/r/b$B-j$J"
  echo "python -m kforge_search bench $A" >> $OUT/r/cmd.txt
  vmstat -n 5 > $OUT/r/vmstat-j$J.txt & V=$!
  nvidia-smi dmon -s u -d 5 > $OUT/r/dmon-j$J.txt 2>&1 & D=$!
  s=$(date +%s); timeout --signal=INT ${T:-280} python -m kforge_search bench $A > $OUT/r/b$B-j$J.log 2>&1; echo "budget $B jobs $J wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
  kill $V $D 2>/dev/null
  tail -3 $OUT/r/b$B-j$J.log
done
cd $OUT && tar czf r.tgz r
