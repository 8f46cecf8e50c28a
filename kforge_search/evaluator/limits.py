"""A candidate's time limits, scaled by the reference's own time per call.

A build keeps its limit (a compiler's time has nothing to do with the problem's). A stage
that calls the model (verify, time, unseen) gets

    max(floor, factor x the reference's time per call x the calls the stage makes)

and never more than its configured limit: a candidate that hangs on a 2 ms problem ends in
seconds, not in the fixed 120 s. The reference's time per call is what its child measured
over 5 calls on timing inputs, or over those made in its first second (the inputs, the call,
a copy: measure_per_call), so the harness's own work per call is in it. Compiling inside
such a stage (Triton compiles a kernel at its first call, an autotuner runs every config)
is timed against the build limit: the worker says when it compiles (evaluator/compiling.py).
On an interpreter (cpu-triton: timing not meaningful) a candidate is legitimately orders of
magnitude slower than the reference, and the configured limits stay as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kforge_search.evaluator.job import Job
from kforge_search.evaluator.result import LimitsUsed
from kforge_search.evaluator.sandbox import Limits

if TYPE_CHECKING:
    from kforge_search.evaluator.config import EvalConfig

PER_CALL_RUNS = 5  # the reference's calls timed for its time per call ...
# ... or fewer, once they took this long (at least one). Each call makes its inputs and copies
# its outputs back: on an H200, 5 calls of a level-1 problem of 6 GiB took 23-27 s of the
# ~29 s its reference took before the problem's first draft, for a figure only the time
# limits read (a mean of 1 or 5 calls: either is far inside the limits' factor)
PER_CALL_BUDGET_S = 1.0
RECORDED = ("build", "verify", "time", "unseen")


def scaled_s(
    limit_s: float, floor_s: float, factor: float, per_call_ms: float, calls: int
) -> float:
    """Seconds for a stage of `calls` calls: the scaled figure, within [floor, limit]."""
    return round(min(limit_s, max(floor_s, factor * per_call_ms / 1e3 * calls)), 3)


def candidate_limits(
    config: EvalConfig, job: Job, per_call_ms: float, unseen_per_call_ms: float, scale: bool
) -> tuple[Limits, LimitsUsed]:
    """The candidate child's limits and what is recorded of them. `scale`: the platform's
    timing is meaningful (compiled code) and the factor is not 0."""
    base = config.limits()
    if not (scale and config.limit_factor > 0 and per_call_ms > 0):
        return base, LimitsUsed(tuple((s, base.timeout(s)) for s in RECORDED), per_call_ms)

    def stage(limit_s: float, ms: float, calls: int) -> float:
        return scaled_s(limit_s, config.limit_floor_s, config.limit_factor, ms, calls)

    unseen_ms = unseen_per_call_ms or per_call_ms
    scaled = (
        ("verify", stage(base.timeout("verify"), per_call_ms, job.total_trials)),
        ("time", stage(base.timeout("time"), per_call_ms, job.warmup + job.timed_runs)),
        ("unseen", stage(base.timeout("unseen"), unseen_ms, job.total_trials)),
    )
    limits = replace(base, stage_timeouts_s=(*scaled, *base.stage_timeouts_s))
    used = LimitsUsed(tuple((s, limits.timeout(s)) for s in RECORDED), per_call_ms, True)
    return limits, used


def measure_per_call(forward: Callable[[list[Any]], list[Any]], module: Any, job: Job) -> float:
    """The reference's time per call that candidate_limits scales by: its inputs, the call,
    a copy back; the mean of PER_CALL_RUNS calls, or of those made by PER_CALL_BUDGET_S.
    Run in the reference's child (reference_child.py)."""
    from kforge_search.evaluator.inputs import timing_inputs

    calls = 0
    started = time.perf_counter()
    while calls < min(job.timed_runs, PER_CALL_RUNS):
        [t.to("cpu") for t in forward(timing_inputs(module, job, calls))]
        calls += 1
        if time.perf_counter() - started >= PER_CALL_BUDGET_S:
            break
    return (time.perf_counter() - started) * 1e3 / max(calls, 1)
