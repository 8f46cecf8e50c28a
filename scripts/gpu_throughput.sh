#!/usr/bin/env bash
# Usage: scripts/gpu_throughput.sh OUTDIR [throughput|efficiency|shared|all]   (GPU machine)
# The search's figures on a GPU: its throughput and its efficiency (all, the default:
# throughput then efficiency). From the repo root:
# throughput: scripts/search_throughput.py with 1 evaluator actor, then with 2 where the
#   machine has 2 GPUs (same problems and settings, a fresh cache each): evaluations per
#   GPU-minute, busy fractions, best speedups, and the 2-vs-1 ratio.
# shared: 1 evaluator actor, then 2 sharing one GPU (--per-gpu 2): GPU busy and evaluations.
# efficiency: kforge bench --search-efficiency (evolutionary vs random genomes, budget 12,
#   3 trials, loose) on EFF_PROBLEMS (default: 01 13 21).
# Env: PROBLEMS (default 01 02 03 05 09 13 16 21), LINEAGES (2), GENERATIONS (2), SIZES (""),
# MAX_MINUTES ("": no time box; else each search stops at the first generation past it).
set -uo pipefail
out=${1:?OUTDIR}
what=${2:-all}
mkdir -p "$out"
py=${PYTHON:-$(command -v python || command -v python3)}  # some images have no `python`
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
problems=${PROBLEMS:-01 02 03 05 09 13 16 21}
args=(--lineages "${LINEAGES:-2}" --generations "${GENERATIONS:-2}" --problems $problems)
[ -n "${SIZES:-}" ] && args+=(--sizes "$SIZES")
[ -n "${MAX_MINUTES:-}" ] && args+=(--max-minutes "$MAX_MINUTES")  # time-box each run
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name --format=csv,noheader | tee "$out/gpus.txt"
if [ "$what" = throughput ] || [ "$what" = all ]; then
  "$py" scripts/search_throughput.py "$out" --workers 1 "${args[@]}" | tail -30
  if [ "$gpus" -ge 2 ]; then
    "$py" scripts/search_throughput.py "$out" --workers 2 "${args[@]}" | tail -30
    "$py" - "$out" <<'PY'
import json, sys
one = json.load(open(f"{sys.argv[1]}/throughput-w1.json"))
two = json.load(open(f"{sys.argv[1]}/throughput-w2.json"))
ratio = two["evaluations_per_minute"] / one["evaluations_per_minute"]
print(f"2 evaluator actors vs 1: {ratio:.2f}x evaluations per minute "
      f"({two['evaluations']} in {two['wall_s']} s vs {one['evaluations']} in {one['wall_s']} s)")
PY
  fi
fi
if [ "$what" = shared ]; then  # 2 evaluator actors sharing one GPU vs 1 (devicelock.py)
  "$py" scripts/search_throughput.py "$out" --workers 1 "${args[@]}" | tail -30
  "$py" scripts/search_throughput.py "$out" --workers 2 --per-gpu 2 "${args[@]}" | tail -30
fi
if [ "$what" = efficiency ] || [ "$what" = all ]; then
  suite=$(mktemp -d)
  for n in ${EFF_PROBLEMS:-01 13 21}; do cp problems/level2/${n}_*.py "$suite/"; done
  "$py" -m kforge_search bench "$suite" --platform cuda-triton --policy loose \
    --search-efficiency --budget 12 --trials 3 --out "$out/efficiency" 2>&1 | tail -25
fi
