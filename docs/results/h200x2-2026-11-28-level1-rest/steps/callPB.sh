# the rows whose kernels 0b27356 changes (row passes), strict, one bench per GPU; then loose if time is left
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
N=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
POL=${POL:-strict}; T=${T:-400}
( while sleep 10; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo; done > $R/gpumem.txt ) &
MON=$!; PIDS=(); M=""
for i in $(seq 0 $((N-1))); do
  ( CUDA_VISIBLE_DEVICES=$i KFORGE_CACHE_DIR=/tmp/kfc$i timeout --signal=INT --kill-after=20 $T python -m kforge_search bench out/kb/sel_pb --platform cuda-triton --policy $POL --budget 2 --jobs 3 --shard $i/$N --out $R/$POL$i > $R/$POL$i.log 2>&1 ) &
  PIDS+=($!); M="$M --merge $R/$POL$i"
done
wait "${PIDS[@]}"; kill $MON
python -m kforge_search bench out/kb/sel_pb --platform cuda-triton --policy $POL $M --out $R/$POL > $R/$POL-merge.log 2>&1
grep -h "x over" $R/$POL?.log | sort
for i in $(seq 0 $((N-1))); do rm -rf $R/$POL$i/best; done
cd $OUT && tar czf r.tgz r
