# issue 22: bf16 dots that cast their fp32 tiles in registers (d8e1392): GPU tests, 6_Matmul_with_large_K loose budget 2;
# issue 23: bench --throughput A/B on one machine: this tree, then 4d51141 (call 31's tree), fresh caches each
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; lscpu | grep -E "Model name|MHz" > $OUT/r/cpu.txt; cp out/kb/commit.txt out/kb/call36.sh $OUT/r/
export PYTHONPATH=/tmp/site:$PWD
timeout 100 python -m pytest -q -m gpu tests/agents/builtin/test_families_gpu.py -k "bf16_gemm and (linear or inputs_kn)" -p no:cacheprovider > $OUT/r/gputests.txt 2>&1; tail -2 $OUT/r/gputests.txt
mkdir -p /tmp/k6; cp out/kb/level1_nc/6_Matmul_with_large_K_dimension_.py /tmp/k6/
timeout --signal=INT 100 python -m kforge_search bench /tmp/k6 --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $OUT/r/k6 > $OUT/r/k6.log 2>&1
grep -E "OK|INCORRECT|REJECT|FAIL|ERROR" $OUT/r/k6.log | cut -c1-260
for V in new old; do
  if [ $V = old ]; then mkdir -p /tmp/old && tar xJf out/kb/old.tar.xz -C /tmp/old && cd /tmp/old && export PYTHONPATH=/tmp/site:/tmp/old; fi
  export KFORGE_CACHE_DIR=/tmp/kc-$V TRITON_CACHE_DIR=/tmp/tc-$V
  timeout --signal=INT 170 python -m kforge_search bench --throughput --platform cuda-triton --duration ${D:-2.1} --out $OUT/r/tp-$V > $OUT/r/tp-$V.log 2>&1
  echo "== $V"; sed -n 2,8p $OUT/r/tp-$V.log | cut -c1-200
done
cd $OUT && tar czf r.tgz r
