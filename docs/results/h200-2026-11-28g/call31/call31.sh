# issue 23: the oracle's check of chosen timed runs over CUDA IPC (GPU test), then throughput A/B: off (0) and on (1), each with fresh caches
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call31.sh $OUT/r/
timeout 120 python -m pytest -q -m gpu tests/test_gpu.py -k oracle_compares -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -3 $OUT/r/gputests.txt
for M in ${MS:-0 1}; do
  export KFORGE_CACHE_DIR=/tmp/kc-$M TRITON_CACHE_DIR=/tmp/tc-$M KFORGE_TIMED_CHECK_IN_ORACLE=$M KFORGE_EVENT_JOURNAL=$OUT/r/events-$M.txt
  echo "KFORGE_TIMED_CHECK_IN_ORACLE=$M python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.3} --out \$OUT/r/tp$M" >> $OUT/r/cmd.txt
  timeout --signal=INT ${T2:-195} python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.3} --out $OUT/r/tp$M > $OUT/r/tp$M.log 2>&1
  sed -n 2,16p $OUT/r/tp$M.log
done
cd $OUT && tar czf r.tgz r
