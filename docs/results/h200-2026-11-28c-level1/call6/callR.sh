set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
timeout 60 python out/kb/seedx.py out/kb/level1_nc/36_RMSNorm_.py > $OUT/r/seedx.txt 2>&1
timeout --signal=INT 90 python -m kforge_search bench out/kb/sel19e --platform cuda-triton --policy strict --budget 2 --jobs 2 --out $OUT/r/strict > $OUT/r/strict.log 2>&1
timeout --signal=INT 70 python -m kforge_search bench out/kb/sel19e --platform cuda-triton --policy loose --budget 2 --jobs 2 --out $OUT/r/loose > $OUT/r/loose.log 2>&1
timeout 90 python -m pytest -q -m gpu tests/agents/builtin/test_families_gpu.py -k "rms or sum_middle or argmin_middle" -p no:cacheprovider > $OUT/r/gputests.txt 2>&1
grep -v -i warn $OUT/r/seedx.txt; tail -4 $OUT/r/strict.log; tail -4 $OUT/r/loose.log; tail -3 $OUT/r/gputests.txt
cp out/kb/callR.sh $OUT/r/
cd $OUT && tar czf r.tgz r
