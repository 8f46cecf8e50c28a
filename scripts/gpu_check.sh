#!/usr/bin/env bash
# Usage: scripts/gpu_check.sh OUTDIR [all|tests|table]   (on a GPU machine, from the repo root)
# tests: the GPU tests (tests/test_gpu.py); table: `kforge eval` of the example GPU candidates
# (examples/candidates/) at the problems' real sizes, as a markdown speedup table
# (scripts/speedup_table.py) in OUTDIR/table.md; all (default): both.
set -uo pipefail
out=${1:-out}
mkdir -p "$out/json"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-/tmp/kforge-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$out/gpu.txt"
if [ "${2:-all}" != table ]; then
  python -m pytest -q -m gpu tests/test_gpu.py 2>&1 | tee "$out/gpu_tests.log" | tail -40
  [ "${2:-all}" = tests ] && exit 0
fi
run() {  # platform candidate problem
  python -m kforge_search eval "examples/candidates/$2" --problem "$3" --platform "$1" --json \
    > "$out/json/$1--$(basename "$2" .py).json" 2>> "$out/eval_errors.log"
}
run cuda-triton triton/elementwise_chain.py level1/10_elementwise_chain
run cuda-triton triton/softmax.py level1/04_softmax
run cuda-triton triton/gemm_bias_relu.py level2/01_gemm_bias_relu
run cuda-triton triton/gemm_gelu_scale.py level2/02_gemm_gelu_scale
run cuda-cpp cuda_cpp/elementwise_chain.py level1/10_elementwise_chain
run cuda-cpp cuda_cpp/softmax.py level1/04_softmax
run cuda-cpp cuda_cpp/gemm_bias_relu.py level2/01_gemm_bias_relu
python scripts/speedup_table.py "$out"/json/cuda-*.json | tee "$out/table.md"
tar czf "$out/json.tgz" -C "$out" json && rm -rf "$out/json"
