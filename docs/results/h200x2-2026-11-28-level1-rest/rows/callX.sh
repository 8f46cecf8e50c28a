set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name --format=csv > $OUT/r/gpus.txt
L=out/kb/level1_nc
CUDA_VISIBLE_DEVICES=0 timeout 200 python out/kb/blockx.py $L/99_TripletMarginLoss.py $L/24_LogSoftmax.py $L/23_Softmax.py $L/100_HingeLoss.py $L/33_BatchNorm.py $L/36_RMSNorm_.py > $OUT/r/blockx.txt 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 200 python out/kb/poolc.py > $OUT/r/poolc.txt 2>&1 &
wait
grep -v Warn $OUT/r/blockx.txt $OUT/r/poolc.txt
