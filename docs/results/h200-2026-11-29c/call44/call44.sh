# issue 23: the fixed GPU test (compare-runs under the hold); then item 6 again (budget 16, level-2 shard 0/3, 8 jobs, cold) with the event and lock journals: where a bench's time goes
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call44.sh $OUT/r/
KFORGE_SLOW=1 timeout 100 python -m pytest -q -m gpu "tests/evaluator/test_compile_off_lane.py::test_on_a_gpu_files_are_written_off_the_lock_and_every_request_is_made_under_it" -p no:cacheprovider -rA > $OUT/r/gputests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/r/gputests.txt | tail -5
export KFORGE_CACHE_DIR=/tmp/kc-b16 TRITON_CACHE_DIR=/tmp/tc-b16 KFORGE_EVENT_JOURNAL=$OUT/r/events.txt KFORGE_LOCK_JOURNAL=$OUT/r/locks.txt
A="problems/level2 --platform cuda-triton --policy loose --budget 16 --jobs 8 --shard 0/3 --out $OUT/r/b16"
echo "KFORGE_EVENT_JOURNAL=... KFORGE_LOCK_JOURNAL=... python -m kforge_search bench $A" >> $OUT/r/cmd.txt
s=$(date +%s); timeout --signal=INT 390 python -m kforge_search bench $A > $OUT/r/b16.log 2>&1; echo "budget 16 jobs 8 wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
tail -4 $OUT/r/b16.log | cut -c1-220
xz -9 $OUT/r/events.txt $OUT/r/locks.txt $OUT/r/b16.log
cd $OUT && tar czf r.tgz r
