# strict level 2 over both GPUs, then a throughput search on GPU 0 alone
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
G=$(nvidia-smi -L | wc -l)
ARGS="--platform cuda-triton --policy strict --budget 2 --jobs 4 --gpus $G --out $OUT/r/strict"
echo "python -m kforge_search bench problems/level2 $ARGS" > $OUT/r/cmd.txt
timeout --signal=INT ${T1:-300} python -m kforge_search bench problems/level2 $ARGS > $OUT/r/strict.log 2>&1
tail -8 $OUT/r/strict.log
echo "CUDA_VISIBLE_DEVICES=0 python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} --out \$OUT/r/tp" >> $OUT/r/cmd.txt
( nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader -l 1 > $OUT/r/smi.txt & echo $! > /tmp/smi.pid )
CUDA_VISIBLE_DEVICES=0 timeout --signal=INT ${T2:-230} python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} --out $OUT/r/tp > $OUT/r/tp.log 2>&1
kill $(cat /tmp/smi.pid)
tail -30 $OUT/r/tp.log
cd $OUT && tar czf r.tgz r
