set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; cp out/kb/commit.txt out/kb/call30.sh $OUT/r/; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt
timeout --signal=INT ${T:-510} python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy loose --budget 2 --jobs 2 --gpus 4 --rest-of out/kb/prev_loose --out $OUT/r/loose > $OUT/r/loose.log 2>&1
tail -8 $OUT/r/loose.log
cd $OUT && tar czf r.tgz r
