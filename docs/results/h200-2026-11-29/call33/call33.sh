# issue 22/23: where a level-1 row's time goes before its first draft (the reference line), then 38_L1Norm_ alone with host memory sampled
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call33.sh $OUT/r/
{ nproc; free -m; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.high 2>&1; cat /proc/sys/vm/overcommit_memory; } > $OUT/r/host.txt 2>&1
(while sleep 2; do echo "$(date +%s) $(free -m | awk '/Mem/{print $3, $7}') $(cat /sys/fs/cgroup/memory.current 2>/dev/null) $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader)"; done) > $OUT/r/mem.txt 2>&1 &
MON=$!
mkdir -p /tmp/three; for p in 19_ReLU 23_Softmax 26_GELU_; do cp out/kb/level1_nc/$p.py /tmp/three/; done
date +%s > $OUT/r/t_three.txt
timeout --signal=INT ${T1:-200} python -m kforge_search bench /tmp/three --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $OUT/r/three > $OUT/r/three.log 2>&1
grep -E "reference|seconds|row" $OUT/r/three.log | cut -c1-300 | head -20
mkdir -p /tmp/l1n; cp out/kb/level1_nc/38_L1Norm_.py /tmp/l1n/
date +%s > $OUT/r/t_l1n.txt
timeout --signal=INT ${T2:-300} python -m kforge_search bench /tmp/l1n --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $OUT/r/l1n > $OUT/r/l1n.log 2>&1
tail -8 $OUT/r/l1n.log | cut -c1-300
cat /sys/fs/cgroup/memory.events > $OUT/r/memevents.txt 2>&1; dmesg 2>&1 | tail -30 > $OUT/r/dmesg.txt
kill $MON; tail -3 $OUT/r/mem.txt; sort -k2 -n $OUT/r/mem.txt | tail -1
cd $OUT && tar czf r.tgz r
