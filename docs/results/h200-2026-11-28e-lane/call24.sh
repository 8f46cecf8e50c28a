set -u
tar xJf .device-site/site.tar.xz -C /tmp && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/r; cp out/kb/commit.txt $OUT/r/
python out/kb/ctxint.py 4 8 > $OUT/r/ctxint.txt 2>&1; cat $OUT/r/ctxint.txt
python out/kb/ctxint.py 8 8 > $OUT/r/ctxint8.txt 2>&1; cat $OUT/r/ctxint8.txt
