#!/usr/bin/env bash
# The builtin synthesizer's bench on a GPU (issue 5), detached so that it outlives one device
# call. From the repo root, on the GPU machine:
#   scripts/gpu_bench.sh start RUNDIR [BUDGET] [SUITE]  # strict, then loose, in a new session
#   scripts/gpu_bench.sh watch RUNDIR SECONDS OUTDIR    # wait (up to SECONDS), copy results
# Results: RUNDIR/{strict,loose}/bench.{json,csv} (rewritten after every problem), RUNDIR/log.
set -uo pipefail
cmd=$1 run=$2
export PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-/tmp/kforge-cache}
case "$cmd" in
start)
  budget=${3:-2} suite=${4:-level2}
  mkdir -p "$run"
  setsid nohup bash -c "
    for policy in strict loose; do
      python -m kforge_search bench $suite --platform cuda-triton --policy \$policy \
        --budget $budget --out $run/\$policy
    done
    touch $run/done" > "$run/log" 2>&1 < /dev/null &
  echo "started in $run" ;;
watch)
  secs=$3 out=$4
  for _ in $(seq "$secs"); do [ -e "$run/done" ] && break; sleep 1; done
  mkdir -p "$out"
  for policy in strict loose; do
    [ -d "$run/$policy" ] || continue
    mkdir -p "$out/$policy" && cp "$run/$policy"/bench.json "$run/$policy"/bench.csv "$out/$policy/" 2>/dev/null
  done
  cp "$run/log" "$out/log"
  grep -E "^  [0-9]" "$run/log" | tail -60
  [ -e "$run/done" ] && echo DONE || echo RUNNING ;;
esac
