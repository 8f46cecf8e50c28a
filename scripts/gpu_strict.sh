#!/usr/bin/env bash
# One H100 session's GPU work for issues 5 and 6, in one detached run whose parts go side by
# side (evaluator/devicelock.py keeps every timed run alone on the GPU):
#   - the strict bench, budget 3 (seed, presplit tf32x3, bf16x3 per problem), JOBS at once;
#   - the GPU tests (tests/test_gpu.py and the adversarial suite);
#   - the search-efficiency bench (EFF_PROBLEMS, loose, budget 12, 3 trials);
# then, alone on the GPU, the three-dot schemes timed bare (scripts/tf32x3_promote.py).
# From the repo root:
#   scripts/gpu_strict.sh start RUNDIR [STATE]        # STATE: as scripts/gpu_bench.sh takes it
#   scripts/gpu_strict.sh watch RUNDIR SECONDS OUTDIR # wait up to SECONDS, copy what is there
set -uo pipefail
cmd=$1 run=$2
py=${PYTHON:-$(command -v python || command -v python3)}
export PYTHONUNBUFFERED=1
case "$cmd" in
start)
  mkdir -p "$run/eff"
  for n in ${EFF_PROBLEMS:-01 13}; do cp problems/level2/${n}_*.py "$run/eff/"; done
  setsid nohup bash -c "
    RUNS='strict:${BUDGET:-3}' JOBS=${JOBS:-4} scripts/gpu_bench.sh start $run/bench ${3:-}
    timeout 900 $py -m pytest -q -m gpu -rfE tests/test_gpu.py tests/adversarial \
      -p no:cacheprovider > $run/pytest.txt 2>&1 &
    timeout 900 $py -m kforge_search bench $run/eff --platform cuda-triton --policy loose \
      --search-efficiency --budget 12 --trials 3 --out $run/efficiency > $run/eff.txt 2>&1 &
    wait
    while [ ! -e $run/bench/done ]; do sleep 5; done
    timeout 300 $py scripts/tf32x3_promote.py > $run/promote.txt 2>&1
    touch $run/done" > "$run/log" 2>&1 < /dev/null &
  echo "started in $run" ;;
watch)
  secs=$3 out=$4
  for _ in $(seq "$secs"); do [ -e "$run/done" ] && break; sleep 1; done
  mkdir -p "$out"
  cp "$run"/promote.txt "$run"/pytest.txt "$run"/eff.txt "$out/" 2>/dev/null
  cp "$run"/efficiency/efficiency.json "$out/" 2>/dev/null
  [ -d "$run/bench" ] && scripts/gpu_bench.sh watch "$run/bench" 1 "$out/bench" | tail -30
  tail -3 "$run/pytest.txt" 2>/dev/null; tail -12 "$run/eff.txt" 2>/dev/null
  tail -16 "$run/promote.txt" 2>/dev/null
  [ -e "$run/done" ] && echo DONE || echo RUNNING ;;
esac
