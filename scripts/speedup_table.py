"""Usage: python scripts/speedup_table.py FILE.json ...   (`kforge eval --json` outputs)

Prints a markdown table of their speedups over eager and torch.compile."""

import json
import sys

print("| candidate | platform | status | p50 ms | eager ms | compile ms | vs eager | vs compile |")
print("|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            r = json.load(f)
    except ValueError:
        print(f"| {path} | - | no JSON | | | | | |")
        continue
    base = {b["kind"]: b for b in r["baselines"]}

    def ms(b):
        return f"{b['timing']['p50_ms']:.3f}" if b and b.get("timing") else "-"

    def x(v):
        return f"{v:.2f}x" if v else "-"

    p50 = f"{r['timing']['p50_ms']:.3f}" if r.get("timing") else "-"
    print(
        f"| {path.rsplit('/', 1)[-1]} | {r['platform']} | {r['status']} | {p50} | "
        f"{ms(base.get('eager'))} | {ms(base.get('compile'))} | {x(r['speedup_vs_eager'])} | "
        f"{x(r['speedup_vs_compile'])} |"
    )
