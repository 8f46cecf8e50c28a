# GPU tests (GPU 0) beside the bf16 micro-bench (GPU 1), then level 2 loose over both GPUs
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
(CUDA_VISIBLE_DEVICES=0 timeout 180 python -m pytest -q -m gpu -p no:cacheprovider tests/evaluator/test_peers.py tests/agents/builtin/test_families_gpu.py -k "bf16_gemm or reduced_peer" > $OUT/r/gputests.txt 2>&1) &
CUDA_VISIBLE_DEVICES=1 timeout 180 python out/kb/bf20.py level2/01_gemm_bias_relu level2/12_gemm_logsumexp out/kb/level1_nc/1_Square_matrix_multiplication_.py out/kb/level1_nc/2_Standard_matrix_multiplication_.py out/kb/level1_nc/6_Matmul_with_large_K_dimension_.py out/kb/level1_nc/3_Batched_matrix_multiplication.py > $OUT/r/bf20.txt 2>&1
wait
tail -3 $OUT/r/gputests.txt; cat $OUT/r/bf20.txt | cut -c1-400
S=problems/level2 P=loose J=4 T=${T:-330} bash out/kb/call20.sh
