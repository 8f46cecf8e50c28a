"""Models run as constructed, in training mode: the buffers a forward changes (BatchNorm's
running statistics) are compared like outputs. Triton candidates under the interpreter
(cpu-triton), so nothing is built."""

from __future__ import annotations

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.conftest import ROOT

TRAINING = ROOT / "tests" / "fixtures" / "training"
HONEST = (TRAINING / "batchnorm1d_triton.py").read_text()


@pytest.fixture(scope="module")
def evaluator():
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))
    yield evaluator
    evaluator.close()


@pytest.fixture(scope="module")
def problem():
    return load_problem(TRAINING / "batchnorm1d.py")


def evaluate(evaluator, problem, source):
    return evaluator.evaluate_source(source, problem, get_platform("cpu-triton"))


def test_the_reference_records_the_buffers_its_forward_changes(evaluator, problem):
    ref = evaluator.reference(problem, get_platform("cpu-triton"))
    names = ("bn.num_batches_tracked", "bn.running_mean", "bn.running_var")
    assert ref.buffer_names == names
    assert [int(t["bn.num_batches_tracked"]) for t in ref.buffers] == list(range(1, 10))


def test_a_candidate_that_updates_the_running_statistics_passes(evaluator, problem):
    result = evaluate(evaluator, problem, HONEST)
    assert result.status is Status.OK, result.message
    assert result.correctness.trials_passed == result.correctness.trials_run == 9  # 2 edge


@pytest.mark.parametrize(
    ("old", "new", "buffer", "says"),
    [
        ("UPDATE_RUNNING = True", "UPDATE_RUNNING = False", "bn.running_mean", "elements differ"),
        ("UNBIASED = True", "UNBIASED = False", "bn.running_var", "elements differ"),
        ("self.bn", "self.norm", "bn.num_batches_tracked", "has no buffer"),  # other names
    ],
)
def test_a_candidate_that_leaves_a_buffer_wrong_is_incorrect_naming_it(
    evaluator, problem, old, new, buffer, says
):
    faulty = HONEST.replace(old, new)
    assert faulty != HONEST
    result = evaluate(evaluator, problem, faulty)
    assert result.status is Status.INCORRECT, result.message
    assert result.stage == "verify" and result.artifacts.mismatch.buffer == buffer
    assert f"buffer `{buffer}`" in result.message and says in result.message
    assert result.correctness.trials_passed < result.correctness.trials_run
