# level 1 (65 non-conv) on every GPU of the machine, one bench per GPU: POL, T seconds, PREV (a folder with bench.json: only the rest)
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt; free -g >> $R/gpus.txt
POL=${POL:-strict}; T=${T:-480}; PREV=${PREV:-}
N=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
REST=""; [ -n "$PREV" ] && REST="--rest-of $PREV"
( while sleep 10; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo; done > $R/gpumem.txt ) &
MON=$!; PIDS=(); M=""
for i in $(seq 0 $((N-1))); do
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy $POL --budget 2 --jobs ${JOBS:-3} $REST --shard $i/$N --out $R/$POL$i > $R/$POL$i.log 2>&1 ) &
  PIDS+=($!); M="$M --merge $R/$POL$i"
done
wait "${PIDS[@]}"; kill $MON
python -m kforge_search bench out/kb/level1_nc --platform cuda-triton --policy $POL $REST $M --out $R/$POL > $R/$POL-merge.log 2>&1
python scripts/level1_figures.py $R/$POL/bench.json > $R/$POL-fig.txt 2>&1
cat $R/$POL-fig.txt; grep -h "x over" $R/$POL?.log | sort | head -80
for i in $(seq 0 $((N-1))); do rm -rf $R/$POL$i/best; done
cd $OUT && tar czf r.tgz r
