# H100: level 1 strict from scratch (or the rest of PREV); H200: the 8 rows the 4 x H200 table of 2026-11-28 lacks
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  export PREV=out/kb/prev_h200
fi
T=${T:-510} bash out/kb/callH.sh
