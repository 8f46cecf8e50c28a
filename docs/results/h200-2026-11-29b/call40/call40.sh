# issue 23: GPU tests of the verification path (resident reference trials, next trial beside the comparison, the streamed reference, the oracle's IPC check); then bench --throughput 8 per GPU at this tree, then the same with KFORGE_TIMED_CHECK_IN_ORACLE=1, fresh caches each
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call40.sh $OUT/r/
KFORGE_SLOW=1 timeout 170 python -m pytest -q -m gpu tests/evaluator/test_resident.py tests/evaluator/test_compile_off_lane.py tests/evaluator/test_streamed_reference.py "tests/test_gpu.py::test_the_oracle_compares_chosen_runs_shared_over_cuda_ipc" -p no:cacheprovider -rA > $OUT/r/gputests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" $OUT/r/gputests.txt | tail -14
for V in dflt oracle; do
  export KFORGE_CACHE_DIR=/tmp/kc-$V TRITON_CACHE_DIR=/tmp/tc-$V KFORGE_EVENT_JOURNAL=$OUT/r/events-$V.txt
  if [ $V = oracle ]; then export KFORGE_TIMED_CHECK_IN_ORACLE=1; fi
  echo "$V (KFORGE_TIMED_CHECK_IN_ORACLE=${KFORGE_TIMED_CHECK_IN_ORACLE:-}): python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out \$OUT/r/tp-$V" >> $OUT/r/cmd.txt
  timeout --signal=INT 175 python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out $OUT/r/tp-$V > $OUT/r/tp-$V.log 2>&1
  echo "== $V"; sed -n 2,18p $OUT/r/tp-$V.log | cut -c1-250
done
cd $OUT && tar czf r.tgz r
