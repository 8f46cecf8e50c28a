# 1D pool variants on GPU 0 alone, then the rows 0b27356 changes (strict, one bench per GPU)
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name --format=csv > $OUT/r/gpus-v.txt
CUDA_VISIBLE_DEVICES=0 timeout 120 python out/kb/poolv.py > $OUT/r/poolv.txt 2>&1; grep -v Warn $OUT/r/poolv.txt
T=${T:-380} bash out/kb/callS.sh
