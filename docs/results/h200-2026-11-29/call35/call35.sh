# issue 23: GPU tests of the streamed reference at this tree; then bench --throughput with 8 and 12 evaluators per GPU (fresh caches each), one after the other
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call35.sh $OUT/r/
KFORGE_SLOW=1 timeout 150 python -m pytest -q -m gpu tests/evaluator/test_streamed_reference.py -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -3 $OUT/r/gputests.txt
for P in ${PS:-8 12}; do
  export KFORGE_CACHE_DIR=/tmp/kc-$P TRITON_CACHE_DIR=/tmp/tc-$P KFORGE_EVENT_JOURNAL=$OUT/r/events-$P.txt
  echo "python -m kforge_search bench --throughput --platform cuda-triton --per-gpu $P --duration ${D:-2.3} --out \$OUT/r/tp$P" >> $OUT/r/cmd.txt
  timeout --signal=INT ${T2:-195} python -m kforge_search bench --throughput --platform cuda-triton --per-gpu $P --duration ${D:-2.3} --out $OUT/r/tp$P > $OUT/r/tp$P.log 2>&1
  sed -n 2,18p $OUT/r/tp$P.log | cut -c1-250
done
cd $OUT && tar czf r.tgz r
