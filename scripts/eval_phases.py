"""Usage: python scripts/eval_phases.py OUTDIR [--problems 01 13] [--python-profile] ...

Where one evaluation's time goes, on the machine it runs on. All options:

    python scripts/eval_phases.py OUTDIR [--problems 01 13] [--platform cuda-triton] \
        [--sizes NAME] [--policy loose] [--repeat 2] [--python-profile] [--suite DIR]

For each problem the builtin agent's seed draft is evaluated `repeat` times by one
Evaluator: the first pays for the reference and the baselines, the later ones cost what a
search step costs. Prints EvalResult.phases per evaluation. With --python-profile the
evaluator's child processes run under cProfile (KFORGE_PROFILE_WORKER) and the top
functions by cumulative time are printed per child. Writes OUTDIR/phases.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--problems", nargs="+", default=["01", "13"])
    ap.add_argument("--platform", default="cuda-triton")
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--policy", default="loose")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--python-profile", action="store_true")
    ap.add_argument(
        "--suite", default=None, help="a folder of problem files (default: bundled level2)"
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KFORGE_CACHE_DIR", tempfile.mkdtemp(prefix="kforge-phases-"))
    profiles = out / "worker-profiles"
    if args.python_profile:
        profiles.mkdir(exist_ok=True)
        os.environ["KFORGE_PROFILE_WORKER"] = str(profiles)

    from kforge_search.agents.base import Context
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.evaluator import EvalConfig, Evaluator
    from kforge_search.platforms import get_platform
    from kforge_search.problem import resolve_problem

    bundled = Path(__file__).resolve().parents[1] / "problems" / "level2"
    suite = Path(args.suite) if args.suite else bundled
    names = sorted(p.stem for p in suite.glob("*.py"))
    platform = get_platform(args.platform)
    evaluator = Evaluator(EvalConfig(policy=args.policy))
    rows = []
    for prefix in args.problems:
        name = next(n for n in names if n.startswith(prefix + "_"))
        where = str(suite / f"{name}.py") if args.suite else f"level2/{name}"
        problem = resolve_problem(where, size_set=args.sizes)
        context = Context(problem, platform, args.policy, budget=1)
        (draft, *_) = BuiltinAgent().propose(context)
        for attempt in range(args.repeat):
            started = time.monotonic()
            result = evaluator.evaluate_source(draft.source, problem, platform)
            wall = time.monotonic() - started
            phases = dict(result.phases)
            p50 = result.timing.p50_ms if result.timing else None
            row = {"problem": name, "attempt": attempt, "status": result.status.value}
            rows.append({**row, "wall_s": round(wall, 2), "p50_ms": p50, "phases": phases})
            order = sorted(phases.items(), key=lambda kv: -kv[1])
            where = ", ".join(f"{k} {v:.2f}" for k, v in order)
            print(f"{name} #{attempt}: {result.status.value} in {wall:.1f} s: {where}", flush=True)
            if result.status.value != "OK":
                print(f"  {result.message}", flush=True)
                tail = result.artifacts.output_tail if result.artifacts else ""
                print("  " + tail[-3000:].replace("\n", "\n  "), flush=True)
    (out / "phases.json").write_text(json.dumps(rows, indent=1))
    if args.python_profile:
        for path in sorted(profiles.glob("*.prof"), key=lambda p: p.stat().st_mtime):
            print(f"\n== {path.name}: top 25 by cumulative time")
            try:
                stats = pstats.Stats(str(path))
            except (EOFError, ValueError) as exc:  # killed while writing
                print(f"(unreadable: {exc})")
                continue
            stats.sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
