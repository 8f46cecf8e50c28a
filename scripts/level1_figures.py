"""A bench.json's figures over its non-convolution problems (KernelBench level 1's 65):
verified, geomean over the peer of record (verified rows; and over every row, an unverified
one counted as 1.0x), over fp32 eager/compile, fast_1 (and how many of its rows are faster by
1% or less: parity within the timing's noise), fast_1.5, median roofline, and the rows not
verified with why.

    python scripts/level1_figures.py OUT/bench.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

from kforge_search.search.suite_bench import PARITY


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def main(path: str) -> None:
    rows = [r for r in json.loads(Path(path).read_text())["rows"] if "conv" not in r["problem"]]
    verified = [r for r in rows if r["verified"]]
    over_peer = [r["speedup"] for r in verified if r["speedup"]]
    over_fp32 = [r["speedup_fp32"] for r in verified if r.get("speedup_fp32")]
    every = [r["speedup"] if r["verified"] and r["speedup"] else 1.0 for r in rows]
    roofs = [r["roofline"] for r in verified if r["roofline"] is not None]

    def x(v: float | None) -> str:
        return f"{v:.2f}x" if v is not None else "-"

    print(f"rows {len(rows)}: {dict(Counter(r['status'] for r in rows))}")
    print(
        f"verified {len(verified)}; geomean over peer {x(geomean(over_peer))} ({len(over_peer)} "
        f"with a peer); all {len(rows)} (others 1.0x) {x(geomean(every))}; over fp32 "
        f"{x(geomean(over_fp32))}; fast_1 {sum(s > 1 for s in over_peer)} "
        f"({sum(1 < s <= 1 + PARITY for s in over_peer)} of them by 1% or less); fast_1.5 "
        f"{sum(s > 1.5 for s in over_peer)}; median roofline "
        f"{100 * statistics.median(roofs) if roofs else 0:.0f}%; "
        f"bent {sum(bool(r.get('bent')) for r in verified)}"
    )
    for r in rows:
        if not r["verified"]:
            print(f"  not verified: {r['problem']} {r['status']} {(r['message'] or '')[:140]}")


if __name__ == "__main__":
    main(sys.argv[1])
