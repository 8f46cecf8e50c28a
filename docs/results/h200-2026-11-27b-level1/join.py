"""DST/bench.json: BASE's rows, each replaced or joined by the rows of the later runs' bench.json
(files given after BASE, in order)."""
import json, sys
from pathlib import Path
base, dst, *later = sys.argv[1:]
d = json.loads(Path(base).read_text())
rows = {r["problem"]: r for r in d["rows"]}
for f in later:
    for r in json.loads(Path(f).read_text())["rows"]:
        if r["status"] not in ("NOT_RUN",):
            rows[r["problem"]] = r
d["rows"] = list(rows.values())
Path(dst).mkdir(parents=True, exist_ok=True)
(Path(dst) / "bench.json").write_text(json.dumps(d))
import collections
print(dst, len(rows), collections.Counter(r["status"] for r in rows.values() if not r["status"].startswith("unsupported")))
