# throughput on one GPU with the event journal; the split of a CUDA warm-up
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
for i in 1 2; do python -c "
import time;t=time.time();import torch;t1=time.time();torch.cuda.init();t2=time.time();torch.empty(1,device='cuda');torch.cuda.synchronize();t3=time.time()
print('import %.2f init %.2f context+alloc %.2f'%(t1-t,t2-t1,t3-t2))" >> $OUT/r/warm.txt 2>&1; done
cat $OUT/r/warm.txt
export KFORGE_EVENT_JOURNAL=$OUT/r/events.txt
echo "python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} --out \$OUT/r/tp" >> $OUT/r/cmd.txt
( nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader -l 1 > $OUT/r/smi.txt & echo $! > /tmp/smi.pid )
timeout --signal=INT ${T2:-230} python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.5} --out $OUT/r/tp > $OUT/r/tp.log 2>&1
kill $(cat /tmp/smi.pid)
sed -n 1,32p $OUT/r/tp.log
cd $OUT && tar czf r.tgz r
