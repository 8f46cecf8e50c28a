# issue 23 item 6: a held reference's trials compared in its oracle (oracle_held.py): GPU tests, then bench --throughput with it (default) and without (KFORGE_TRIALS_IN_ORACLE=0), 8 per GPU, same machine, fresh caches each
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call45.sh $OUT/r/
KFORGE_SLOW=1 timeout 150 python -m pytest -q -m gpu tests/test_gpu.py -k "held or oracle or wrong_values" tests/evaluator/test_shared_outputs.py tests/evaluator/test_resident.py tests/evaluator/test_streamed_reference.py -p no:cacheprovider -rA > $OUT/r/gputests.txt 2>&1; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/r/gputests.txt | tail -25
for V in in8 off8; do
  export KFORGE_CACHE_DIR=/tmp/kc-$V TRITON_CACHE_DIR=/tmp/tc-$V KFORGE_EVENT_JOURNAL=$OUT/r/events-$V.txt
  if [ $V = off8 ]; then export KFORGE_TRIALS_IN_ORACLE=0; else unset KFORGE_TRIALS_IN_ORACLE; fi
  echo "$V (KFORGE_TRIALS_IN_ORACLE=${KFORGE_TRIALS_IN_ORACLE:-}): python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out \$OUT/r/tp-$V" >> $OUT/r/cmd.txt
  timeout --signal=INT 175 python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out $OUT/r/tp-$V > $OUT/r/tp-$V.log 2>&1
  echo "== $V"; sed -n 2,16p $OUT/r/tp-$V.log | cut -c1-200
done
cd $OUT && tar czf r.tgz r
