# GPU tests (lock, zygote), then one shard of level 2 (loose) at budget 2 and budget 16 on one GPU
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt $OUT/r/
timeout 150 python -m pytest -q -m gpu tests/evaluator/test_compile_off_lane.py tests/evaluator/test_zygote.py -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -5 $OUT/r/gputests.txt
for BJ in ${BJS:-2:4 16:8}; do
  B=${BJ%:*}; J=${BJ#*:}
  A="problems/level2 --platform cuda-triton --policy loose --budget $B --jobs $J --shard ${SH:-0/3} --out $OUT/r/b$B"
  echo "python -m kforge_search bench $A" >> $OUT/r/cmd.txt
  s=$(date +%s); timeout --signal=INT ${T:-330} python -m kforge_search bench $A > $OUT/r/b$B.log 2>&1; echo "budget $B jobs $J wall $(( $(date +%s) - s )) s" | tee -a $OUT/r/walls.txt
  tail -6 $OUT/r/b$B.log
done
cd $OUT && tar czf r.tgz r
