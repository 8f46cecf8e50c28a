set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt
S=$(date +%s)
( while sleep 5; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader >> $R/gpumem.txt; done ) &
KFORGE_CACHE_DIR=/tmp/kfc timeout --signal=INT --kill-after=10 235 python -m kforge_search bench out/kb/sel_45 --platform cuda-triton --policy strict --budget 2 --jobs 1 --out $R/s45 > $R/s45.log 2>&1
cp $R/s45/bench.csv $R/s45-bench.csv 2>/dev/null
echo "bench $(( $(date +%s) - S ))s" >> $R/gpus.txt
kill %1
cd $OUT && tar czf r.tgz r
