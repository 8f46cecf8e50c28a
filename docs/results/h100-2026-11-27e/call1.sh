set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
KFORGE_CACHE_DIR=/tmp/kfc-t timeout 80 python -m pytest -q -m gpu tests/evaluator/test_compile_off_lane.py -x > $R/offlane-test.txt 2>&1
D=${DUR:-3}
KFORGE_CACHE_DIR=/tmp/kfc-new timeout --signal=INT --kill-after=10 240 python -m kforge_search bench --throughput --platform cuda-triton --duration $D --out $R/new8 > $R/new8.log 2>&1
cd out/kb/old && PYTHONPATH=/tmp/site:$PWD KFORGE_CACHE_DIR=/tmp/kfc-old timeout --signal=INT --kill-after=10 240 python -m kforge_search bench --throughput --platform cuda-triton --duration $D --out $R/old8 > $R/old8.log 2>&1
cd $OUT && tar czf r.tgz r
