# one suite, one policy, over every GPU of the machine; REST=folder with an earlier bench.json
# run with: S=problems/level2 P=loose J=4 T=560 bash out/kb/call20.sh  (carry [".device-site","out/kb"])
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
G=$(nvidia-smi -L | wc -l)
ARGS="--platform cuda-triton --policy $P --budget ${B:-2} --jobs ${J:-3} --gpus $G --out $OUT/r/$P"
if [ -n "${REST:-}" ]; then ARGS="$ARGS --rest-of $REST"; fi
echo "python -m kforge_search bench $S $ARGS" > $OUT/r/cmd.txt
timeout --signal=INT ${T:-540} python -m kforge_search bench $S $ARGS > $OUT/r/$P.log 2>&1
tail -12 $OUT/r/$P.log
cd $OUT && tar czf r.tgz r
