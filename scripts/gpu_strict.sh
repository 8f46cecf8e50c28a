#!/usr/bin/env bash
# Issue 5's open target on the H100 (strict at >= 70% of the roofline), in one detached run:
# the three-dot schemes timed bare (scripts/tf32x3_promote.py), the GPU tests, then the strict
# bench with budget 3 (seed, presplit tf32x3, bf16x3 per problem). From the repo root:
#   scripts/gpu_strict.sh start RUNDIR [STATE]        # STATE: as scripts/gpu_bench.sh takes it
#   scripts/gpu_strict.sh watch RUNDIR SECONDS OUTDIR # wait up to SECONDS, copy what is there
set -uo pipefail
cmd=$1 run=$2
py=${PYTHON:-$(command -v python || command -v python3)}
export PYTHONUNBUFFERED=1
case "$cmd" in
start)
  mkdir -p "$run"
  setsid nohup bash -c "
    timeout 420 $py scripts/tf32x3_promote.py > $run/promote.txt 2>&1
    timeout 900 $py -m pytest -q -m gpu -rfE tests/test_gpu.py tests/adversarial -p no:cacheprovider > $run/pytest.txt 2>&1
    RUNS='strict:${BUDGET:-3}' scripts/gpu_bench.sh start $run/bench ${3:-}
    while [ ! -e $run/bench/done ]; do sleep 5; done
    touch $run/done" > "$run/log" 2>&1 < /dev/null &
  echo "started in $run" ;;
watch)
  secs=$3 out=$4
  for _ in $(seq "$secs"); do [ -e "$run/done" ] && break; sleep 1; done
  mkdir -p "$out"
  cp "$run"/promote.txt "$run"/pytest.txt "$out/" 2>/dev/null
  [ -d "$run/bench" ] && scripts/gpu_bench.sh watch "$run/bench" 1 "$out/bench" | tail -5
  tail -3 "$run/pytest.txt" 2>/dev/null; cat "$run/promote.txt" 2>/dev/null | tail -16
  [ -e "$run/done" ] && echo DONE || echo RUNNING ;;
esac
