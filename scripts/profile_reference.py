"""Usage: python scripts/profile_reference.py CACHE_DIR [--problem level2/16_gemm_layernorm_relu]
[--platform cpu-cpp] [--set NAME=VALUE ...] [--keep-mb 6553] [--unseen] [--top 30]

Where the evaluator PARENT's time goes while it gets a problem's reference
(Evaluator.reference): loading its child's files, the numerics, the node's reference store.
Run it twice with the same fresh CACHE_DIR: the first run computes the reference and stores
it (cold), the second, a fresh process, reads it from the store (warm: what the other
evaluators of a node pay). The child's own time shows as the parent's wait for its events
(Child.next_event); the child's profile: KFORGE_PROFILE_WORKER (scripts/eval_phases.py).
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import os
import pstats
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--problem", default="level2/16_gemm_layernorm_relu")
    ap.add_argument("--platform", default="cpu-cpp")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE size override")
    # a 128 GiB host's (an H100 node's) share: the reference is held, not streamed
    ap.add_argument("--keep-mb", type=int, default=6553, help="EvalConfig.reference_keep_mb")
    ap.add_argument("--unseen", action="store_true", help="also the unseen sizes' reference")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    os.environ["KFORGE_CACHE_DIR"] = args.cache

    from kforge_search.evaluator import EvalConfig, Evaluator
    from kforge_search.platforms import get_platform
    from kforge_search.problem import resolve_problem

    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    problem = resolve_problem(args.problem, overrides=overrides or None)
    platform = get_platform(args.platform)
    evaluator = Evaluator(EvalConfig(reference_keep_mb=args.keep_mb))
    started = time.monotonic()
    import torch  # noqa: F401  (once per process: not the reference's cost)

    print(f"import torch: {time.monotonic() - started:.2f} s", flush=True)
    profiler = cProfile.Profile()
    started = time.monotonic()
    try:
        profiler.enable()
        reference = evaluator.reference(problem, platform)
        if args.unseen:
            evaluator.reference(problem.resized("unseen"), platform, oracle=False)
        profiler.disable()
    finally:
        evaluator.close()
    wall = time.monotonic() - started
    print(f"{problem.name} {problem.sizes_key}: reference in {wall:.2f} s, "
          f"{reference.held_bytes / 2**20:.0f} MiB held", flush=True)  # fmt: skip
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
