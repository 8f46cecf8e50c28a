"""Timed runs asked again where their host clock shows hidden work (candidate_drive.py):
on a loaded host a right kernel's wall clock runs over its CUDA events' time now and then; a
candidate that hides work on another stream is over every time."""

from __future__ import annotations

from kforge_search.evaluator import EvalConfig, Evaluator, Status, candidate_drive, timed_check
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

HIDDEN = ("timing:hidden-work", "a run takes 6.6 ms of wall clock but only 3.2 ms")


def _evaluate(monkeypatch, hidden_for: int):
    """An honest candidate, its first `hidden_for` timings called hidden work."""
    seen: list[tuple[int, str]] = []  # (timed runs, stale) of each call
    real = candidate_drive.timing_problem

    def flaky(timing, stale):
        seen.append((timing.runs, stale))
        if not stale and sum(1 for _, s in seen if not s) <= hidden_for:
            return HIDDEN
        return real(timing, stale)

    monkeypatch.setattr(candidate_drive, "timing_problem", flaky)
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))
    try:
        result = evaluator.evaluate(
            EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cpu-triton")
        )
    finally:
        evaluator.close()
    return result, [s for _, s in seen if not s], seen


def test_a_timing_called_hidden_work_is_asked_again_and_stands_once_clean(monkeypatch):
    result, timings, seen = _evaluate(monkeypatch, hidden_for=timed_check.WALL_ATTEMPTS - 1)
    assert result.status is Status.OK, result.message
    assert len(timings) == timed_check.WALL_ATTEMPTS  # each try timed whole, on a fresh draw
    assert all(runs > 0 for runs, _ in seen)


def test_hidden_work_every_time_is_rejected(monkeypatch):
    result, timings, _ = _evaluate(monkeypatch, hidden_for=timed_check.WALL_ATTEMPTS)
    assert result.status is Status.REJECTED and "wall clock" in result.message
    assert len(timings) == timed_check.WALL_ATTEMPTS
