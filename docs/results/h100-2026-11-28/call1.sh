set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
S=$(date +%s)
KFORGE_CACHE_DIR=/tmp/kfc-t timeout 110 python -m pytest -q -m gpu tests/evaluator/test_zygote.py tests/evaluator/test_compile_off_lane.py tests/evaluator/test_devicelock.py > $R/gputests.txt 2>&1
echo "tests $(( $(date +%s) - S ))s" >> $R/gpus.txt
for Z in 1 0; do
KFORGE_ZYGOTE=$Z KFORGE_CACHE_DIR=/tmp/kfc-z$Z timeout --signal=INT --kill-after=10 175 python -m kforge_search bench --throughput --platform cuda-triton --duration 2.6 --out $R/z$Z > $R/z$Z.log 2>&1
cp $R/z$Z/throughput.json $R/z$Z-throughput.json 2>/dev/null
echo "z$Z $(( $(date +%s) - S ))s" >> $R/gpus.txt
done
KFORGE_CACHE_DIR=/tmp/kfc-p timeout 90 python out/kb/poolsweep.py out/kb/level1/45_Average_Pooling_2D.py out/kb/level1/42_Max_Pooling_2D.py out/kb/level1/41_Max_Pooling_1D.py out/kb/level1/44_Average_Pooling_1D.py > $R/pools.txt 2>&1
cd $OUT && tar czf r.tgz r
