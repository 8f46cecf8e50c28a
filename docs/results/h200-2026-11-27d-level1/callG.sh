set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/commit.txt; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt
( export CUDA_VISIBLE_DEVICES=0; timeout --signal=INT --kill-after=5 ${BUDGET:-95} python -m kforge_search bench out/kb/sel8 --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $R/l8 > $R/l8.log 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1; timeout --signal=INT --kill-after=5 ${BUDGET:-95} python -m kforge_search bench out/kb/sel8 --platform cuda-triton --policy strict --budget 2 --jobs 1 --out $R/s8 > $R/s8.log 2>&1 ) &
wait; tar czf $OUT/r.tgz -C $OUT r
