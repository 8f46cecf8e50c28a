#!/usr/bin/env bash
# One `kforge bench` spread over a node's GPUs: shard I of N on GPU I (CUDA_VISIBLE_DEVICES),
# each shard alone on its GPU's timing lane (the device lock is per GPU), then one table of
# them all (--merge: nothing runs again; a problem no shard reached is NOT_RUN).
#
#   scripts/bench_gpus.sh OUT "GPU..." SUITE --platform P [bench options]
#   e.g. scripts/bench_gpus.sh out/l1 "0 1 2 3" out/kb/level1 --platform cuda-triton \
#        --policy strict --budget 2 --jobs 6
#
# OUT/shardI/ holds each shard's run (again with --resume), OUT/shardI.log its progress,
# OUT/all/ the merged bench.json, bench.csv and best/. KFORGE_SHARD_SECONDS stops the shards
# after that many seconds (SIGINT, SIGKILL 20 s later: the rows so far stand; run again to
# go on). To go on from a merged table with the shards sharing what is left evenly, give a
# new OUT and `--rest-of EARLIER/all`: its rows join the new table.
set -u
py=${PYTHON:-$(command -v python || command -v python3)}
if [ $# -lt 3 ]; then
    sed -n 2,15p "$0" | cut -c3- >&2
    exit 2
fi
out=$1
read -r -a gpus <<<"$2"
shift 2
n=${#gpus[@]}
mkdir -p "$out"
for i in "${!gpus[@]}"; do
    CUDA_VISIBLE_DEVICES=${gpus[$i]} timeout --signal=INT --kill-after=20 "${KFORGE_SHARD_SECONDS:-0}" \
        "$py" -m kforge_search bench "$@" --shard "$i/$n" --resume --out "$out/shard$i" \
        >"$out/shard$i.log" 2>&1 &
done
wait
merge=()
for i in "${!gpus[@]}"; do
    [ -f "$out/shard$i/bench.json" ] && merge+=(--merge "$out/shard$i")
done
[ ${#merge[@]} -gt 0 ] || { echo "no shard finished a problem: see $out/shard*.log" >&2; exit 1; }
"$py" -m kforge_search bench "$@" "${merge[@]}" --out "$out/all"
