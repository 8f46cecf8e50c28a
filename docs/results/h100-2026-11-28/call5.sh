set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt
L=out/kb/level1
KFORGE_CACHE_DIR=/tmp/kfc-c timeout 170 python out/kb/colx.py $L/51_Argmax_over_a_dimension.py:c $L/47_Sum_reduction_over_a_dimension.py $L/36_RMSNorm_.py:c $L/52_Argmin_over_a_dimension.py:c > $R/cols.txt 2>&1
cd $OUT && tar czf r.tgz r
