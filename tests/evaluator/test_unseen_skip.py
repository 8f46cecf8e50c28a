"""`unseen_below_ms` (a bench's best kept draft's time): a candidate timed no faster is not
checked at the problem's unseen sizes (it could not be kept); a faster one is, as always."""

from __future__ import annotations

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.candidate_drive import UNSEEN_SKIPPED
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

CHAIN = resolve_problem("level1/10_elementwise_chain", size_set="ci")


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=()))


@pytest.mark.parametrize(("below", "checked"), [(1e-9, False), (1e9, True)])
def test_the_unseen_sizes_are_checked_only_below_the_best_kept_time(evaluator, below, checked):
    # the same C++ source as test_honest's first case: one build, cached by its hash
    result = evaluator.evaluate(
        EXAMPLES / "cpu_cpp/elementwise_chain.py",
        CHAIN,
        get_platform("cpu-cpp"),
        unseen_below_ms=below,
    )
    assert result.status is Status.OK and result.timing is not None, result.message
    assert result.timing.meaningful
    skipped = [w for w in result.warnings if w.startswith(UNSEEN_SKIPPED)]
    assert result.generalizes == ("yes" if checked else "unchecked")
    assert ("unseen" in dict(result.phases)) == checked, result.phases
    assert bool(skipped) != checked, result.warnings


def test_an_interpreted_candidates_time_skips_nothing(evaluator):
    """The Triton interpreter's time says nothing of the kernel's speed: it is checked."""
    result = evaluator.evaluate(
        EXAMPLES / "triton/elementwise_chain.py",
        CHAIN,
        get_platform("cpu-triton"),
        unseen_below_ms=1e-9,
    )
    assert result.status is Status.OK and result.generalizes == "yes", result.message
