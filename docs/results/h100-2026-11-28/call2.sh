set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt; nproc >> $R/gpus.txt
S=$(date +%s)
KFORGE_CACHE_DIR=/tmp/kfc-t timeout 100 python -m pytest -q -m gpu tests/evaluator/test_zygote.py tests/evaluator/test_compile_off_lane.py > $R/gputests.txt 2>&1
echo "tests $(( $(date +%s) - S ))s" >> $R/gpus.txt
L=out/kb/level1
( KFORGE_CACHE_DIR=/tmp/kfc-p timeout 150 python out/kb/poolx.py new $L/42_Max_Pooling_2D.py $L/41_Max_Pooling_1D.py $L/45_Average_Pooling_2D.py $L/43_Max_Pooling_3D.py > $R/pools-new.txt 2>&1
  cd out/kb/old && PYTHONPATH=/tmp/site:$PWD KFORGE_CACHE_DIR=/tmp/kfc-po timeout 60 python ../poolx.py old ../level1/42_Max_Pooling_2D.py ../level1/41_Max_Pooling_1D.py ../level1/45_Average_Pooling_2D.py > $R/pools-old.txt 2>&1 )
echo "pools $(( $(date +%s) - S ))s" >> $R/gpus.txt
for Z in 1 0; do
KFORGE_ZYGOTE=$Z KFORGE_CACHE_DIR=/tmp/kfc-z$Z timeout --signal=INT --kill-after=10 170 python -m kforge_search bench --throughput --platform cuda-triton --duration 2.5 --out $R/z$Z > $R/z$Z.log 2>&1
cp $R/z$Z/throughput.json $R/z$Z-throughput.json 2>/dev/null; rm -f $R/z$Z/search.duckdb
echo "z$Z $(( $(date +%s) - S ))s" >> $R/gpus.txt
done
cd $OUT && tar czf r.tgz r
