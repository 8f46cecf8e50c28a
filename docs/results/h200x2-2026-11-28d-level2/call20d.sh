# GPU tests (GPU 0); level 2 strict over both GPUs; level 1's GEMM rows (1-18) loose over both
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; cp out/kb/commit.txt $OUT/r/; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt
CUDA_VISIBLE_DEVICES=0 timeout 100 python -m pytest -q -m gpu -p no:cacheprovider tests/evaluator/test_peers.py tests/agents/builtin/test_families_gpu.py -k "bf16_gemm or reduced_peer" > $OUT/r/gputests.txt 2>&1
tail -3 $OUT/r/gputests.txt
G=$(nvidia-smi -L | wc -l)
timeout --signal=INT 255 python -m kforge_search bench problems/level2 --platform cuda-triton --policy strict --budget 2 --jobs 4 --gpus $G --out $OUT/r/strict > $OUT/r/strict.log 2>&1
tail -3 $OUT/r/strict.log
timeout --signal=INT 185 python -m kforge_search bench out/kb/l1_gemm --platform cuda-triton --policy loose --budget 2 --jobs 3 --gpus $G --out $OUT/r/l1loose > $OUT/r/l1loose.log 2>&1
tail -22 $OUT/r/l1loose.log
cd $OUT && tar czf r.tgz r
