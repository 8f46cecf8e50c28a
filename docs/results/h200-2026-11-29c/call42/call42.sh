# issue 23: the spares' CUDA contexts one at a time (KFORGE_SPARE_CONTEXTS=one) against the default, 8 per GPU, then 'one' at 10 per GPU; same machine, fresh caches each
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call42.sh $OUT/r/
for V in dflt8 one8 one10; do
  export KFORGE_CACHE_DIR=/tmp/kc-$V TRITON_CACHE_DIR=/tmp/tc-$V KFORGE_EVENT_JOURNAL=$OUT/r/events-$V.txt
  N=${V#dflt}; N=${N#one}
  if [ ${V#one} != $V ]; then export KFORGE_SPARE_CONTEXTS=one; else unset KFORGE_SPARE_CONTEXTS; fi
  echo "$V (KFORGE_SPARE_CONTEXTS=${KFORGE_SPARE_CONTEXTS:-}): python -m kforge_search bench --throughput --platform cuda-triton --per-gpu $N --duration 2.4 --out \$OUT/r/tp-$V" >> $OUT/r/cmd.txt
  timeout --signal=INT 175 python -m kforge_search bench --throughput --platform cuda-triton --per-gpu $N --duration 2.4 --out $OUT/r/tp-$V > $OUT/r/tp-$V.log 2>&1
  echo "== $V"; sed -n 2,16p $OUT/r/tp-$V.log | cut -c1-200
done
cd $OUT && tar czf r.tgz r
