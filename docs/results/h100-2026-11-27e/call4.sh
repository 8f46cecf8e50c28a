set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; cp out/kb/commit.txt $R/; nvidia-smi --query-gpu=name --format=csv > $R/gpus.txt
KFORGE_CACHE_DIR=/tmp/kfc-aff timeout --signal=INT --kill-after=10 205 python -m kforge_search bench --throughput --platform cuda-triton --duration 2.75 --out $R/aff8 > $R/aff8.log 2>&1
KFORGE_CACHE_DIR=/tmp/kfc-t timeout 170 python -m pytest -q -m gpu tests/evaluator/test_compile_off_lane.py tests/evaluator/test_peers.py tests/test_gpu.py > $R/gputests.txt 2>&1
R=$R python3 - > $R/locks-summary.txt <<'PY'
import statistics as st
rows=[l.split() for l in open(__import__("os").environ["R"]+"/aff8/locks.txt") if l.strip() and not l.startswith("#")] if __import__("os").path.exists(__import__("os").environ["R"]+"/aff8/locks.txt") else []
labs={}
for r in rows:
    k=(r[4].split(":")[-1] if len(r)>4 else "?",r[1]); labs.setdefault(k,[]).append(float(r[3])-float(r[2]))
for k,v in sorted(labs.items()): print(k,len(v),"median %.2f sum %.1f"%(st.median(v),sum(v)))
PY
cp $R/aff8/throughput.json $R/aff8-throughput.json 2>/dev/null
cd $OUT && tar czf r.tgz r
