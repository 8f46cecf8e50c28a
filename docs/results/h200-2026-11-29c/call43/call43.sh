# issue 23: GPU tests of the spares' path (contexts one at a time by default now) and the trial loop; then item 6: budget 16 on level-2 shard 0/3 with 8 jobs and cold caches, as call 41 (313 s at 2b48a01)
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call43.sh $OUT/r/
KFORGE_SLOW=1 timeout 140 python -m pytest -q -m gpu tests/evaluator/test_zygote.py tests/evaluator/test_compile_off_lane.py "tests/test_gpu.py::test_the_oracle_compares_chosen_runs_shared_over_cuda_ipc" -p no:cacheprovider -rA > $OUT/r/gputests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/r/gputests.txt | tail -12
export KFORGE_CACHE_DIR=/tmp/kc-b16 TRITON_CACHE_DIR=/tmp/tc-b16
A="problems/level2 --platform cuda-triton --policy loose --budget 16 --jobs 8 --shard 0/3 --out $OUT/r/b16"
echo "python -m kforge_search bench $A" >> $OUT/r/cmd.txt
s=$(date +%s); timeout --signal=INT 400 python -m kforge_search bench $A > $OUT/r/b16.log 2>&1; echo "budget 16 jobs 8 wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
tail -12 $OUT/r/b16.log | cut -c1-220
cd $OUT && tar czf r.tgz r
