# issue 23: bench --throughput, 8 evaluators per GPU, with the event journal's new `compared` lines (what a first trial's comparison spends its time on) and the lock journal
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call38.sh $OUT/r/
export KFORGE_CACHE_DIR=/tmp/kc-8 TRITON_CACHE_DIR=/tmp/tc-8 KFORGE_EVENT_JOURNAL=$OUT/r/events-8.txt
(vmstat -n 5 > $OUT/r/vmstat.txt &) ; (nvidia-smi dmon -s u -d 5 > $OUT/r/dmon.txt &)
echo "python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.5 --out \$OUT/r/tp8" > $OUT/r/cmd.txt
timeout --signal=INT 230 python -m kforge_search bench --throughput --platform cuda-triton --per-gpu 8 --duration 2.5 --out $OUT/r/tp8 > $OUT/r/tp8.log 2>&1
sed -n 2,18p $OUT/r/tp8.log | cut -c1-250
pkill vmstat; pkill -f "nvidia-smi dmon"
cd $OUT && tar czf r.tgz r
