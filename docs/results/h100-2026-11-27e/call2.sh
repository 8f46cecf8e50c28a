set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt
KFORGE_CACHE_DIR=/tmp/kfc-new16 timeout --signal=INT --kill-after=10 240 python -m kforge_search bench --throughput --platform cuda-triton --duration 3 --per-gpu 16 --out $R/new16 > $R/new16.log 2>&1
export KFORGE_CACHE_DIR=/tmp/kfc
( timeout --signal=INT --kill-after=10 300 python -m kforge_search bench out/kb/sel_loss --platform cuda-triton --policy strict --budget 2 --jobs 2 --out $R/sL > $R/sL.log 2>&1 ) &
( timeout --signal=INT --kill-after=10 300 python -m kforge_search bench out/kb/sel_loss --platform cuda-triton --policy loose --budget 2 --jobs 2 --out $R/lL > $R/lL.log 2>&1 ) &
wait
for x in sL lL; do python scripts/level1_figures.py $R/$x/bench.json > $R/$x-fig.txt 2>&1; done
cd $OUT && tar czf r.tgz r
