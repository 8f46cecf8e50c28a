"""Generated candidates through the real Evaluator: static check, guards, unseen sizes."""

from __future__ import annotations

import pytest

from kforge_search.agents.base import Context
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems, resolve_problem
from tests.conftest import PROBLEMS

FAST = [
    ("cpu-triton", "level2/19_gemm_instancenorm_tanh"),  # view into segments, second pass
    ("cpu-triton", "level2/22_mlp_ffn_gelu_residual"),  # two GEMMs and a residual input
    ("cpu-cpp", "level2/05_gemm_scale_clamp_min"),  # row statistic broadcast back
    ("cpu-cpp", "level2/14_gemm_maxpool_scale"),  # pooling in the epilogue
    ("cpu-triton", "level2/35_gemm_dropout_gelu_scale"),  # the mask drawn as the reference's
    ("cpu-cpp", "level2/31_gemm_batchnorm_softmax_scale"),  # running statistics compared
]
LEVEL2, _ = find_problems(PROBLEMS / "level2")


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=()))


def evaluate(evaluator: Evaluator, platform: str, problem):
    plat = get_platform(platform)
    (draft,) = BuiltinAgent().propose(Context(problem, plat))
    return evaluator.evaluate_source(draft.source, problem, plat)


@pytest.mark.parametrize(("platform", "name"), FAST)
def test_generated_candidate_is_ok_and_generalizes(evaluator, platform, name):
    result = evaluate(evaluator, platform, resolve_problem(name, size_set="ci"))
    assert result.status is Status.OK, result.message
    assert result.generalizes == "yes"
    assert result.correctness.trials_passed == result.correctness.trials_run >= 7


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_every_level2_problem_is_ok(evaluator, platform, problem):
    result = evaluate(evaluator, platform, problem.resized("ci"))
    assert result.status is Status.OK, result.message
    assert result.generalizes == "yes"
