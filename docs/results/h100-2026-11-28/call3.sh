set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
S=$(date +%s)
L=out/kb/level1
KFORGE_CACHE_DIR=/tmp/kfc-p timeout 170 python out/kb/poolx.py new $L/42_Max_Pooling_2D.py $L/45_Average_Pooling_2D.py $L/41_Max_Pooling_1D.py $L/44_Average_Pooling_1D.py $L/43_Max_Pooling_3D.py $L/46_Average_Pooling_3D.py > $R/pools.txt 2>&1
echo "pools $(( $(date +%s) - S ))s" >> $R/gpus.txt
KFORGE_CACHE_DIR=/tmp/kfc timeout --signal=INT --kill-after=10 280 python -m kforge_search bench out/kb/sel_pool --platform cuda-triton --policy strict --budget 2 --jobs 3 --out $R/sP > $R/sP.log 2>&1
python scripts/level1_figures.py $R/sP/bench.json > $R/sP-fig.txt 2>&1; cp $R/sP/bench.json $R/sP-bench.json 2>/dev/null
echo "bench $(( $(date +%s) - S ))s" >> $R/gpus.txt
cd $OUT && tar czf r.tgz r
