set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
L=out/kb/level1_nc
timeout 100 python out/kb/mb19d.py > $OUT/r/mb19d.txt 2>&1
timeout 100 python out/kb/seedx.py $L/36_RMSNorm_.py $L/51_Argmax_over_a_dimension.py > $OUT/r/seedx.txt 2>&1
timeout --signal=INT 150 python -m kforge_search bench out/kb/sel19b --platform cuda-triton --policy strict --budget 2 --jobs 3 --out $OUT/r/strict > $OUT/r/strict.log 2>&1
timeout --signal=INT 200 python -m kforge_search bench out/kb/sel19c --platform cuda-triton --policy loose --budget 2 --jobs 3 --out $OUT/r/loose > $OUT/r/loose.log 2>&1
grep -v Warn $OUT/r/mb19d.txt $OUT/r/seedx.txt | grep -v warnings.warn
tail -6 $OUT/r/strict.log; tail -12 $OUT/r/loose.log
cp out/kb/mb19d.py $OUT/r/mb19d.py.txt; cp out/kb/callO.sh $OUT/r/
cd $OUT && tar czf r.tgz r
