set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/r/gpus.txt
timeout 420 python out/kb/mb19.py > $OUT/r/mb19.txt 2>&1
grep -v Warn $OUT/r/mb19.txt | tail -20
cp out/kb/mb19.py $OUT/r/mb19.py.txt
