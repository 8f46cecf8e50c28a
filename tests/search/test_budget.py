"""Budgets check themselves; the tracker says which one ran out."""

from __future__ import annotations

import pytest

from kforge_search.search.budget import Budget, BudgetTracker, StopReason


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "at least one limit"),
        ({"max_candidates": 0}, "max_candidates=0"),
        ({"max_candidates": 2.5}, "must be an int"),
        ({"wall_clock_s": -1.0}, "wall_clock_s=-1.0"),
        ({"llm_tokens": True}, "llm_tokens=True"),
        ({"money_usd": float("nan")}, "money_usd=nan"),
    ],
)
def test_budget_rejects_bad_limits(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kwargs)


def test_tracker_names_the_budget_that_ran_out():
    clock = _Clock()
    tracker = BudgetTracker(Budget(max_candidates=3, wall_clock_s=60, money_usd=1.0), clock)
    tracker.add_candidates(2)
    tracker.add_llm(10_000, cost_usd=0.4)
    assert tracker.exhausted() is None
    clock.now += 61
    stop = tracker.exhausted()
    assert stop is not None and stop.reason is StopReason.WALL_CLOCK
    assert stop.limit == 60 and stop.used == pytest.approx(61)
    assert "wall_clock_s used 61 of 60" in stop.message
    tracker.add_candidates()
    assert tracker.exhausted().reason is StopReason.CANDIDATES  # the first in order


@pytest.mark.parametrize(
    ("budget", "spend", "reason"),
    [
        (Budget(gpu_seconds=10), lambda t: t.add_gpu_seconds(10.5), StopReason.GPU_SECONDS),
        (Budget(llm_tokens=100), lambda t: t.add_llm(100), StopReason.LLM_TOKENS),
        (Budget(money_usd=0.5), lambda t: t.add_llm(1, cost_usd=0.6), StopReason.MONEY),
        (Budget(max_candidates=1), lambda t: t.add_candidates(), StopReason.CANDIDATES),
    ],
)
def test_each_budget_stops_the_search(budget, spend, reason):
    tracker = BudgetTracker(budget, _Clock())
    assert tracker.exhausted() is None
    spend(tracker)
    assert tracker.exhausted().reason is reason


def test_usage_only_grows():
    tracker = BudgetTracker(Budget(max_candidates=1), _Clock())
    with pytest.raises(ValueError, match="usage only grows"):
        tracker.add_gpu_seconds(-1)
    with pytest.raises(ValueError, match="usage only grows"):
        tracker.add_llm(10, cost_usd=-0.1)
    assert tracker.usage().candidates == 0
