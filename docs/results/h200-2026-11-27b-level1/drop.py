"""Write DIR/bench.json: SRC's rows less the named problems (they run again with --rest-of)."""
import json, sys
from pathlib import Path
src, dst, *names = sys.argv[1:]
d = json.loads(Path(src).read_text())
d["rows"] = [r for r in d["rows"] if not any(r["problem"].startswith(n + "_") or r["problem"] == n for n in names)]
Path(dst).mkdir(parents=True, exist_ok=True)
(Path(dst) / "bench.json").write_text(json.dumps(d))
print(dst, len(d["rows"]), "rows kept")
