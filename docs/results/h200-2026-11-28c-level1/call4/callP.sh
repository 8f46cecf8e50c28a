set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
L=out/kb/level1_nc
timeout 150 python out/kb/seedv.py > $OUT/r/seedv.txt 2>&1
timeout 120 python out/kb/mb19e.py > $OUT/r/mb19e.txt 2>&1
TORCH_LOGS=output_code timeout 60 python -c "
import torch
m = torch.nn.AvgPool1d(8, 1, 4).cuda(); x = torch.rand(64, 128, 65536, device='cuda')
torch.compile(m)(x)" > $OUT/r/inductor_avgpool.txt 2>&1
timeout --signal=INT 150 python -m kforge_search bench out/kb/sel19d --platform cuda-triton --policy strict --budget 2 --jobs 2 --out $OUT/r/strict > $OUT/r/strict.log 2>&1
grep -v Warn $OUT/r/seedv.txt $OUT/r/mb19e.txt | grep -v warnings.warn
grep -n "def triton\|tl.load\|tl.store\|xindex\|XBLOCK\|x0 = \|x1 = \|triton_meta\|num_warps" $OUT/r/inductor_avgpool.txt | head -30
tail -6 $OUT/r/strict.log
cp out/kb/seedv.py $OUT/r/seedv.py.txt; cp out/kb/mb19e.py $OUT/r/mb19e.py.txt; cp out/kb/callP.sh $OUT/r/
cd $OUT && tar czf r.tgz r
