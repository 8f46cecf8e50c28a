# issue 23: GPU tests of the verification path at this tree (the child's next trial runs while the parent compares); then bench --throughput, 8 per GPU, this tree and then d626f9d (trials one at a time) on the same machine, fresh caches each
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r /tmp/old; tar xJf out/kb/old.tar.xz -C /tmp/old
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call39.sh $OUT/r/
KFORGE_SLOW=1 timeout 200 python -m pytest -q -m gpu tests/test_gpu.py tests/evaluator/test_compile_off_lane.py tests/evaluator/test_streamed_reference.py -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -4 $OUT/r/gputests.txt
for V in new old; do
  export KFORGE_CACHE_DIR=/tmp/kc-$V TRITON_CACHE_DIR=/tmp/tc-$V KFORGE_EVENT_JOURNAL=$OUT/r/events-$V.txt
  if [ $V = old ]; then export PYTHONPATH=/tmp/site:/tmp/old; cd /tmp/old; fi
  python -c "import kforge_search, sys; print('$V', kforge_search.__file__)" >> $OUT/r/cmd.txt
  echo "$V: python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out \$OUT/r/tp-$V" >> $OUT/r/cmd.txt
  timeout --signal=INT 175 python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.4 --out $OUT/r/tp-$V > $OUT/r/tp-$V.log 2>&1
  echo "== $V"; sed -n 2,18p $OUT/r/tp-$V.log | cut -c1-250
done
cd $OUT && tar czf r.tgz r
