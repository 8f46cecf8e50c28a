# issue 23 item 6: budget 16, level-2 shard 0/3, 8 jobs, cold, loose, held trials compared in the oracle with the child ahead (default); journals; GPU tests of the lock and the held path first
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call47.sh $OUT/r/
KFORGE_SLOW=1 timeout 130 python -m pytest -q -m gpu tests/evaluator/test_compile_off_lane.py tests/test_gpu.py -k "lock or held" -p no:cacheprovider -rA > $OUT/r/gputests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/r/gputests.txt | tail -12
export KFORGE_CACHE_DIR=/tmp/kc-b16 TRITON_CACHE_DIR=/tmp/tc-b16 KFORGE_EVENT_JOURNAL=$OUT/r/events.txt KFORGE_LOCK_JOURNAL=$OUT/r/locks.txt
A="problems/level2 --platform cuda-triton --policy loose --budget 16 --jobs 8 --shard 0/3 --out $OUT/r/b16"
echo "KFORGE_EVENT_JOURNAL=... KFORGE_LOCK_JOURNAL=... python -m kforge_search bench $A" >> $OUT/r/cmd.txt
s=$(date +%s); timeout --signal=INT 420 python -m kforge_search bench $A > $OUT/r/b16.log 2>&1; echo "budget 16 jobs 8 wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
tail -4 $OUT/r/b16.log | cut -c1-220
xz -9 $OUT/r/events.txt $OUT/r/locks.txt $OUT/r/b16.log
cd $OUT && tar czf r.tgz r
