# issue 23 item 6: one shard of level 2 (14 problems, loose) at budget 16 with 8 jobs, fresh caches (references, baselines and compiles all cold), at this tree (trials beside comparisons, resident reference trials, the timed runs checked in the oracle)
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call41.sh $OUT/r/
export KFORGE_CACHE_DIR=/tmp/kc-b16 TRITON_CACHE_DIR=/tmp/tc-b16
A="problems/level2 --platform cuda-triton --policy loose --budget 16 --jobs 8 --shard 0/3 --out $OUT/r/b16"
echo "python -m kforge_search bench $A" >> $OUT/r/cmd.txt
s=$(date +%s); timeout --signal=INT 420 python -m kforge_search bench $A > $OUT/r/b16.log 2>&1; echo "budget 16 jobs 8 wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
grep -c "" $OUT/r/b16.log; tail -8 $OUT/r/b16.log | cut -c1-250
cd $OUT && tar czf r.tgz r
