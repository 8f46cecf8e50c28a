"""Broken candidates get the right status and an actionable message; hung ones are killed
within their limit, and the evaluator goes on working after every failure."""

from __future__ import annotations

import time

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.guards import child_processes
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import BROKEN, EXAMPLES

CHAIN = "level1/10_elementwise_chain"
VERIFY_LIMIT_S = 15.0

CASES = [
    ("cpu-cpp", "cpu_cpp/wrong_values.py", Status.INCORRECT, "First mismatches at"),
    ("cpu-cpp", "cpu_cpp/wrong_shape.py", Status.INCORRECT, "wrong shape"),
    ("cpu-cpp", "cpu_cpp/nan_output.py", Status.INCORRECT, "non-finite values"),
    ("cpu-cpp", "cpu_cpp/native_crash.py", Status.RUNTIME_ERROR, "SIGSEGV"),
    ("cpu-cpp", "cpu_cpp/infinite_loop.py", Status.TIMEOUT, "time limit of the verify stage"),
    ("cpu-cpp", "cpu_cpp/import_error.py", Status.COMPILE_ERROR, "at import"),
    ("cpu-cpp", "cpu_cpp/compile_error.py", Status.COMPILE_ERROR, "Error building extension"),
    ("cpu-triton", "triton/wrong_values.py", Status.INCORRECT, "First mismatches at"),
    ("cpu-triton", "triton/python_hang.py", Status.TIMEOUT, "time limit of the verify stage"),
]


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=(), verify_timeout_s=VERIFY_LIMIT_S))


def _children() -> set[int]:
    return set(child_processes())


@pytest.mark.parametrize(("platform", "candidate", "status", "says"), CASES)
def test_broken_candidate_gets_its_status(evaluator, platform, candidate, status, says):
    before = _children()
    started = time.monotonic()
    result = evaluator.evaluate(
        BROKEN / candidate, resolve_problem(CHAIN, size_set="ci"), get_platform(platform)
    )
    elapsed = time.monotonic() - started
    assert result.status is status, result.message
    report = " ".join([result.message, result.artifacts.compile_log, result.artifacts.traceback])
    assert says in report
    if status is Status.TIMEOUT:
        assert result.stage == "verify"
        assert elapsed < VERIFY_LIMIT_S + 120  # the limit, plus start-up and a cached build
    spare = {*evaluator.helper_pids(), *evaluator.zygote_pids()}  # its own, no candidate's
    assert _children() - spare <= before, "the evaluator left child processes behind"


def test_evaluator_still_works_after_a_hang(evaluator):
    problem = resolve_problem(CHAIN, size_set="ci")
    hung = evaluator.evaluate(BROKEN / "triton/python_hang.py", problem, get_platform("cpu-triton"))
    assert hung.status is Status.TIMEOUT
    honest = evaluator.evaluate(
        EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cpu-triton")
    )
    assert honest.status is Status.OK, honest.message


def test_static_rejection_names_the_reason(evaluator, tmp_path):
    path = tmp_path / "torch_only.py"
    path.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1\n"
    )
    result = evaluator.evaluate(
        path, resolve_problem(CHAIN, size_set="ci"), get_platform("cpu-cpp")
    )
    assert result.status is Status.REJECTED
    assert result.artifacts.reasons == ("static:no-load-inline",)
    assert "load_inline" in result.message
