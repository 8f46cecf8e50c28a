# issue 22: the 7 level-1 problems call 30 did not reach, loose, one H200
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call32.sh $OUT/r/
unset KFORGE_TIMED_CHECK_IN_ORACLE
timeout --signal=INT ${T:-540} python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy loose --budget 2 --jobs ${J:-2} --rest-of out/kb/prev_loose2 --out $OUT/r/loose > $OUT/r/loose.log 2>&1
tail -12 $OUT/r/loose.log | cut -c1-250
cd $OUT && tar czf r.tgz r
