"""A draft whose evaluation met a crowded device (DEVICE_BUSY: it, or its oracle's reference,
ran out of device memory while others held the device) is evaluated once more before it
counts against the problem's budget (suite_bench.search_problem)."""

from __future__ import annotations

import dataclasses

import pytest

from kforge_search.evaluator.result import Status
from kforge_search.search.suite_bench import search_problem
from tests.search.test_search_problem import _Agent, _Evaluator
from tests.search.test_suite_bench import PROBLEM, result


class _Crowded(_Evaluator):
    """The first `busy` evaluations ran out of device memory that others held."""

    def __init__(self, busy: int):
        super().__init__()
        self.busy, self.calls = busy, []

    def evaluate_source(self, source, problem, platform, unseen_below_ms=None):
        from kforge_search.evaluator.result import DEVICE_BUSY_REASON, Artifacts

        self.calls.append(source)
        if len(self.calls) <= self.busy:
            return dataclasses.replace(
                result(Status.INFRA_ERROR), artifacts=Artifacts(reasons=(DEVICE_BUSY_REASON,))
            )
        return result(Status.OK, 1.0)


@pytest.mark.parametrize("busy", [1, 2])
def test_a_draft_that_met_a_crowded_device_is_evaluated_once_more_before_it_counts(busy):
    from kforge_search.platforms import get_platform

    crowded = _Crowded(busy)
    searched = search_problem(PROBLEM, get_platform("cuda-triton"), "strict", 2, crowded,
                              _Agent(fail_at=9))  # fmt: skip
    statuses = [p.result.status for p in searched.parents]
    if busy == 1:  # the seed's second evaluation is its own; then the next draft
        assert crowded.calls == ["# draft 0", "# draft 0", "# draft 1"]
        assert statuses == [Status.OK, Status.OK]
    else:  # twice busy: that result stands (no third try), and the budget goes on
        assert crowded.calls == ["# draft 0", "# draft 0", "# draft 1"]
        assert statuses == [Status.INFRA_ERROR, Status.OK]
