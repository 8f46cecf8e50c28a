set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; cp out/kb/commit.txt $OUT/r/; nvidia-smi --query-gpu=name --format=csv > $OUT/r/gpus.txt
export KFORGE_EVENT_JOURNAL=$OUT/r/events.txt CUDA_VISIBLE_DEVICES=0
timeout --signal=INT ${T2:-130} python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-1.6} --out $OUT/r/tp > $OUT/r/tp.log 2>&1
sed -n 2,16p $OUT/r/tp.log
cd $OUT && tar czf r.tgz r
