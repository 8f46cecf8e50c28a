# GPU tests of the lock, then throughput with the default actors and with --per-gpu 12
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
timeout 150 python -m pytest -q -m gpu tests/evaluator/test_compile_off_lane.py tests/evaluator/test_zygote.py -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -5 $OUT/r/gputests.txt
for PG in ${PGS:-0 12}; do
  EXTRA=""; [ "$PG" != 0 ] && EXTRA="--per-gpu $PG"
  export KFORGE_EVENT_JOURNAL=$OUT/r/events-$PG.txt
  echo "python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} $EXTRA --out \$OUT/r/tp$PG" >> $OUT/r/cmd.txt
  timeout --signal=INT ${T2:-200} python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} $EXTRA --out $OUT/r/tp$PG > $OUT/r/tp$PG.log 2>&1
  sed -n 2,14p $OUT/r/tp$PG.log
done
cd $OUT && tar czf r.tgz r
