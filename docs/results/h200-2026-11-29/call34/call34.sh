# issue 22/23: the reference's time per call bounded (09a259d): the same three 6 GiB rows again; 39_L2Norm_ alone; the loose GEMM rows at this tree
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/r/gpus.txt; cp out/kb/commit.txt out/kb/call34.sh $OUT/r/
(while sleep 2; do echo "$(date +%s) $(free -m | awk '/Mem/{print $3, $7}') $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader)"; done) > $OUT/r/mem.txt 2>&1 &
MON=$!
mkdir -p /tmp/three /tmp/l2n /tmp/gemm; for p in 19_ReLU 23_Softmax 26_GELU_; do cp out/kb/level1_nc/$p.py /tmp/three/; done
cp out/kb/level1_nc/39_L2Norm_.py /tmp/l2n/
for p in 1_ 2_ 6_ 13_ 14_ 15_ 16_ 17_ 18_; do cp out/kb/level1_nc/${p}*.py /tmp/gemm/; done
ls /tmp/gemm > $OUT/r/gemm-files.txt
S=$(date +%s); timeout --signal=INT ${T1:-150} python -m kforge_search bench /tmp/three --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $OUT/r/three > $OUT/r/three.log 2>&1; echo "three $(( $(date +%s) - S )) s"
grep -E "reference|evaluations in" $OUT/r/three.log | cut -c1-200
S=$(date +%s); timeout --signal=INT ${T2:-150} python -m kforge_search bench /tmp/l2n --platform cuda-triton --policy loose --budget 2 --jobs 1 --out $OUT/r/l2n > $OUT/r/l2n.log 2>&1; echo "l2n $(( $(date +%s) - S )) s"
grep -E "^39|reference" $OUT/r/l2n.log | cut -c1-200
S=$(date +%s); timeout --signal=INT ${T3:-240} python -m kforge_search bench /tmp/gemm --platform cuda-triton --policy loose --budget 2 --jobs 2 --out $OUT/r/gemm > $OUT/r/gemm.log 2>&1; echo "gemm $(( $(date +%s) - S )) s"
grep -A12 "^problem" $OUT/r/gemm.log | cut -c1-160; tail -3 $OUT/r/gemm.log | cut -c1-300
kill $MON; sort -k2 -n $OUT/r/mem.txt | tail -1
cd $OUT && tar czf r.tgz r
