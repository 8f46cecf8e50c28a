set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=/tmp/kfc
mkdir -p /tmp/kfc; [ -f out/kb/kfc.tar ] && tar xf out/kb/kfc.tar -C /tmp/kfc
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpus.txt
cp out/kb/commit.txt $R/commit.txt
T0=$(date +%s); B=${BUDGET:-180}
left() { echo $(( B - ($(date +%s) - T0) )); }
( export CUDA_VISIBLE_DEVICES=0 KFORGE_LOCK_JOURNAL=$R/locks-bn.txt
  timeout --signal=INT --kill-after=10 $(left) python -m kforge_search bench out/kb/selBN --platform cuda-triton --policy strict --budget 2 --jobs 1 --out $R/bn > $R/bn.log 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1; timeout $(( $(left) - 5 )) python out/kb/tiles.py g > $R/tiles-g.jsonl 2> $R/tiles-g.err ) &
wait
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
ls -la $OUT
