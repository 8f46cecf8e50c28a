set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
L=out/kb/level1_nc
timeout 80 python out/kb/mb19b.py > $OUT/r/mb19b.txt 2>&1
timeout 100 python out/kb/mb19c.py > $OUT/r/mb19c.txt 2>&1
timeout 150 python out/kb/seedx.py $L/51_Argmax_over_a_dimension.py $L/9_Tall_skinny_matrix_multiplication_.py $L/4_Matrix_vector_multiplication_.py $L/36_RMSNorm_.py $L/47_Sum_reduction_over_a_dimension.py > $OUT/r/seedx.txt 2>&1
timeout --signal=INT 220 python -m kforge_search bench out/kb/sel19 --platform cuda-triton --policy strict --budget 2 --jobs 3 --out $OUT/r/strict > $OUT/r/strict.log 2>&1
grep -v Warn $OUT/r/mb19b.txt $OUT/r/mb19c.txt $OUT/r/seedx.txt | grep -v warnings.warn
tail -12 $OUT/r/strict.log
cp out/kb/mb19b.py $OUT/r/mb19b.py.txt; cp out/kb/mb19c.py $OUT/r/mb19c.py.txt; cp out/kb/seedx.py $OUT/r/seedx.py.txt; cp out/kb/callN.sh $OUT/r/
cd $OUT && tar czf r.tgz r
