# issue 23: bench --throughput with KFORGE_SPARE_CONTEXTS=one (cc67929: one spare's CUDA context at a time), to set beside call 36's run of the same tree without it
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call37.sh $OUT/r/
export KFORGE_CACHE_DIR=/tmp/kc-one TRITON_CACHE_DIR=/tmp/tc-one KFORGE_SPARE_CONTEXTS=one KFORGE_EVENT_JOURNAL=$OUT/r/events-one.txt
timeout --signal=INT 170 python -m kforge_search bench --throughput --platform cuda-triton --duration 2.1 --out $OUT/r/tp-one > $OUT/r/tp-one.log 2>&1
sed -n 2,20p $OUT/r/tp-one.log | cut -c1-200
cd $OUT && tar czf r.tgz r
