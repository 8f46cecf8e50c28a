# GPU tests of this tree (GPU 0), then level 2 under policy P over both GPUs
set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; cp out/kb/commit.txt $OUT/r/
if [ -n "${TESTS:-}" ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 110 python -m pytest -q -m gpu -p no:cacheprovider $TESTS > $OUT/r/gputests.txt 2>&1
  tail -3 $OUT/r/gputests.txt
fi
S=problems/level2 J=4 bash out/kb/call20.sh
