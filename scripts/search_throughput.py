"""Usage: python scripts/search_throughput.py OUTDIR --workers 1 [--problems 01 02 ...] ...

Search throughput on a GPU machine: one `kforge search` on cuda-triton with the builtin
agent, measured from outside (kforge_search/search/throughput_run.py; `kforge bench
--throughput` is the same for users). All options:

    python scripts/search_throughput.py OUTDIR --workers 1 [--per-gpu 1] [--problems 01 02 ...] \
        [--lineages 1] [--generations 2] [--sizes NAME] [--policy loose] \
        [--platform cuda-triton] [--max-minutes M] [--stop-after S]

While the search runs, the host's CPU time and (nvidia-smi) every GPU's utilization are
sampled twice a second, and the evaluators' device lock holds go to a journal
($KFORGE_LOCK_JOURNAL if set, else OUTDIR/locks-TAG.txt). Afterwards the search's database
gives the evaluations of the run (search steps and the winners' second measurement), their
summed durations (the evaluator actors' busy fraction), where that time went (seconds per
evaluation by phase: start, setup, build, verify, time, unseen, ...), and the best speedup
per problem; `steady` has the figures from the last problem's first evaluation on (the
timing lane's busy fraction from the journal). Each invocation uses a fresh cache folder
(baselines, Triton and C++ builds), so runs with 1 and 2 evaluator actors do the same work.
--stop-after S stops the search after S seconds (as Ctrl-C: what it stored counts). Prints
the figures and writes OUTDIR/throughput-TAG.json (TAG: w1, wauto, w2g2, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kforge_search.evaluator.devicelock import JOURNAL_ENV
from kforge_search.search.throughput_run import (
    DEFAULT_PROBLEMS,
    ThroughputConfig,
    level2_problems,
    measure,
)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=0, help="0: the search's default")
    ap.add_argument("--per-gpu", type=int, default=0, help="actors sharing a GPU; 0: default")
    ap.add_argument(
        "--problems", nargs="+", default=[p.split("/")[1][:2] for p in DEFAULT_PROBLEMS]
    )
    ap.add_argument("--lineages", type=int, default=1)
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--policy", default="loose")
    ap.add_argument("--platform", default="cuda-triton")
    ap.add_argument("--max-minutes", type=float, default=None, help="time-box the search")
    ap.add_argument(
        "--stop-after", type=float, default=None, help="seconds: then the search is stopped"
    )
    args = ap.parse_args()
    tag = f"w{args.workers or 'auto'}" + (f"g{args.per_gpu}" if args.per_gpu > 1 else "")
    journal = os.environ.get(JOURNAL_ENV)
    try:
        config = ThroughputConfig(
            out=Path(args.out),
            problems=level2_problems(args.problems),
            platform=args.platform,
            policy=args.policy,
            lineages=args.lineages,
            generations=args.generations,
            sizes=args.sizes,
            duration_s=args.stop_after,
            workers=args.workers or None,
            per_gpu=args.per_gpu or None,
            max_minutes=args.max_minutes,
            fresh_cache=True,
            tag=tag,
            journal=Path(journal) if journal else None,
        )
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    result = measure(config)
    summary = result.as_dict()
    (config.out / f"throughput-{tag}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
