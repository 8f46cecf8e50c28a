set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
timeout --signal=INT 480 python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy loose --budget 2 --jobs 3 --gpus 2 --rest-of out/kb/prev_loose --out $OUT/r/loose > $OUT/r/loose.log 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 60 python out/kb/mb19e.py > $OUT/r/mb19e.txt 2>&1
grep -E "^(avg|max) " $OUT/r/mb19e.txt
tail -5 $OUT/r/loose.log
cp out/kb/callQ.sh $OUT/r/
cd $OUT && tar czf r.tgz r
