# issue 23 item 6: the same budget-16 bench with the parent comparing the held trials (KFORGE_TRIALS_IN_ORACLE=0), right after call 47 on the same machine
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call48.sh $OUT/r/
export KFORGE_TRIALS_IN_ORACLE=0 KFORGE_CACHE_DIR=/tmp/kc-b16off TRITON_CACHE_DIR=/tmp/tc-b16off KFORGE_EVENT_JOURNAL=$OUT/r/events.txt KFORGE_LOCK_JOURNAL=$OUT/r/locks.txt
A="problems/level2 --platform cuda-triton --policy loose --budget 16 --jobs 8 --shard 0/3 --out $OUT/r/b16"
echo "KFORGE_EVENT_JOURNAL=... KFORGE_LOCK_JOURNAL=... python -m kforge_search bench $A" >> $OUT/r/cmd.txt
s=$(date +%s); timeout --signal=INT 420 python -m kforge_search bench $A > $OUT/r/b16.log 2>&1; echo "budget 16 jobs 8 wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
tail -4 $OUT/r/b16.log | cut -c1-220
xz -9 $OUT/r/events.txt $OUT/r/locks.txt $OUT/r/b16.log
cd $OUT && tar czf r.tgz r
