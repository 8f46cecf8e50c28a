#!/usr/bin/env bash
# Usage: scripts/gpu_bench.sh start RUNDIR [STATE] | watch RUNDIR SECONDS OUTDIR
# The builtin synthesizer's bench on a GPU, detached so that it outlives one device call.
# From the repo root, on the GPU machine:
#   scripts/gpu_bench.sh start RUNDIR [STATE]       # benches in a new session (see RUNS)
#   scripts/gpu_bench.sh watch RUNDIR SECONDS OUTDIR  # wait (up to SECONDS), copy results
# RUNS="policy:budget ..." (default "strict:2 loose:2"); SUITE (default level2); SCREEN (genomes
# timed in-process per problem before the evaluator sees the fastest BUDGET; default 0: off);
# JOBS (problems benched at once, default 1; needs SCREEN=0).
# STATE (optional) is what an earlier machine sent back: STATE/baselines.json seeds the
# baseline cache (same device name and torch version only) and STATE/POLICY/bench.json rows
# are kept (--resume). Results: RUNDIR/POLICY/bench.{json,csv}, rewritten after every problem.
set -uo pipefail
cmd=$1 run=$2
py=${PYTHON:-$(command -v python || command -v python3)}  # some images have no `python`
export PYTHONUNBUFFERED=1 KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-/tmp/kforge-cache}
case "$cmd" in
start)
  state=${3:-} runs=${RUNS:-strict:2 loose:2} suite=${SUITE:-level2} screen=${SCREEN:-0}
  jobs=${JOBS:-1}
  mkdir -p "$run" "$KFORGE_CACHE_DIR"
  if [ -n "$state" ]; then
    [ -f "$state/baselines.json" ] && cp "$state/baselines.json" "$KFORGE_CACHE_DIR/"
    for d in "$state"/*/; do [ -f "$d/bench.json" ] && cp -r "$d" "$run/"; done
  fi
  script=""
  for item in $runs; do
    policy=${item%%:*} budget=${item##*:}
    script+="$py -m kforge_search bench $suite --platform cuda-triton --policy $policy"
    script+=" --budget $budget --screen $screen --jobs $jobs --out $run/$policy --resume; "
  done
  setsid nohup bash -c "$script touch $run/done" > "$run/log" 2>&1 < /dev/null &
  echo "started in $run: $runs" ;;
watch)
  secs=$3 out=$4
  for _ in $(seq "$secs"); do [ -e "$run/done" ] && break; sleep 1; done
  mkdir -p "$out"
  for d in "$run"/*/; do
    [ -f "$d/bench.json" ] || continue
    mkdir -p "$out/$(basename "$d")" && cp "$d"/bench.json "$d"/bench.csv "$out/$(basename "$d")/"
  done
  cp "$run/log" "$out/log"
  cp "$KFORGE_CACHE_DIR/baselines.json" "$out/" 2>/dev/null
  grep -E "^  [0-9]" "$run/log" | tail -40
  [ -e "$run/done" ] && echo DONE || echo RUNNING ;;
esac
