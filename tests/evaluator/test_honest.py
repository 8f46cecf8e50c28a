"""Honest candidates verify and time on the CPU platforms (cpu-cpp, cpu-triton)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

CASES = [
    ("cpu-cpp", "cpu_cpp/elementwise_chain.py", "level1/10_elementwise_chain"),
    ("cpu-cpp", "cpu_cpp/softmax.py", "level1/04_softmax"),
    ("cpu-cpp", "cpu_cpp/gemm_bias_relu.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "triton/elementwise_chain.py", "level1/10_elementwise_chain"),
    ("cpu-triton", "triton/softmax.py", "level1/04_softmax"),
    ("cpu-triton", "triton/gemm_bias_relu.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "triton/gemm_gelu_scale.py", "level2/02_gemm_gelu_scale"),
    # unusual but legitimate means (issue 20): they must stay OK
    ("cpu-triton", "unusual/gemm_float64_accumulate.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "unusual/gemm_k_outer.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "unusual/gemm_padded_output.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "unusual/gemm_pretransposed_weight.py", "level2/01_gemm_bias_relu"),
    ("cpu-triton", "unusual/sum_kahan.py", "level1/08_sum_reduction"),
    ("cpu-triton", "unusual/transpose_add_transposed_output.py", "level1/11_transpose_add"),
    ("cpu-triton", "unusual/transpose_add_flat_index.py", "level1/11_transpose_add"),
    ("cpu-triton", "unusual/elementwise_chain_chunked.py", "level1/10_elementwise_chain"),
    ("cpu-triton", "unusual/elementwise_chain_transposed_views.py", "level1/10_elementwise_chain"),
    ("cpu-triton", "unusual/softmax_two_pass.py", "level1/04_softmax"),
    ("cpu-triton", "unusual/softmax_online.py", "level1/04_softmax"),
    ("cpu-triton", "unusual/softmax_float64.py", "level1/04_softmax"),
    ("cpu-triton", "unusual/layernorm_welford.py", "level1/05_layernorm"),
    ("cpu-cpp", "unusual/cpp_gemm_double_k_outer.py", "level2/01_gemm_bias_relu"),
    ("cpu-cpp", "unusual/cpp_sum_kahan.py", "level1/08_sum_reduction"),
    ("cpu-cpp", "unusual/cpp_softmax_double.py", "level1/04_softmax"),
]
# The status is the evaluator's judgement (tolerances scaled on the edge trials); beside it,
# an honest kernel's largest relative error stays small. Not strict's 1e-4: absolute errors
# grow with the outputs (the shifted trial's inputs + 1000 make a GEMM's outputs thousands
# and a sum's ~1e5, one float32 ulp 2.4e-4 and 7.8e-3), and a GEMM output that nearly
# cancels there shows 2.9e-3 relative to its own size.
MAX_REL_ERR = 1e-2


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=()))


@pytest.mark.parametrize(("platform", "candidate", "problem"), CASES)
def test_honest_candidate_is_ok(evaluator, platform, candidate, problem):
    result = evaluator.evaluate(
        EXAMPLES / candidate, resolve_problem(problem, size_set="ci"), get_platform(platform)
    )
    assert result.status is Status.OK, result.message
    assert result.correctness.trials_run == result.correctness.trials_passed >= 5
    c = result.correctness  # within strict's atol, or (large outputs) close relative to them
    assert c.max_abs_err <= 1e-4 or c.max_rel_err <= MAX_REL_ERR, c
    assert result.timing is not None and result.timing.p50_ms > 0
    assert result.timing.meaningful == (platform == "cpu-cpp")
    assert result.timing.runs == (50 if platform == "cpu-cpp" else 5)
    assert result.generalizes == "yes"  # verified again at the problem's unseen sizes
    assert result.artifacts.reasons == ()
    # where the wall clock went: the child's stages and the evaluator's own phases, which
    # add up to the evaluation's duration (less what lies between them: copies, cleanup)
    phases = dict(result.phases)
    assert {"start", "build", "verify", "time", "unseen"} <= set(phases), phases  # setup: ~0
    assert all(s > 0 for s in phases.values())
    assert 0.5 * result.duration_s <= sum(phases.values()) <= result.duration_s + 0.01


def test_harness_profiling_writes_each_childs_stats(tmp_path, monkeypatch):
    """KFORGE_PROFILE_WORKER (scripts/eval_phases.py): every child leaves whole cProfile
    stats, the candidate's too although the parent kills it after its last event."""
    import pstats

    monkeypatch.setenv("KFORGE_PROFILE_WORKER", str(tmp_path))
    evaluator = Evaluator(EvalConfig(baselines=(), share_references=False))  # its own: run
    result = evaluator.evaluate(
        EXAMPLES / "cpu_cpp/gemm_bias_relu.py",
        resolve_problem("level2/01_gemm_bias_relu", size_set="ci"),
        get_platform("cpu-cpp"),
    )
    assert result.status is Status.OK, result.message
    (candidate,) = tmp_path.glob("candidate-*.prof")
    functions = {name for _, _, name in pstats.Stats(str(candidate)).stats}  # type: ignore[attr-defined]
    assert {"run_candidate", "verify_unseen", "time_model"} <= functions
    assert len(list(tmp_path.glob("reference-*.prof"))) == 2  # the default and unseen sizes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_the_next_candidate_runs_in_the_warm_spare(evaluator):
    """evaluator/spare.py: after an evaluation a warm child waits; the next candidate runs in
    it (and it is gone afterwards: one candidate per process); close() ends the last one."""
    problem = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
    source = EXAMPLES / "cpu_cpp/gemm_bias_relu.py"
    evaluator.evaluate(source, problem, get_platform("cpu-cpp"))
    (spare,) = evaluator.spare_pids()
    oracles = evaluator.oracle_pids()  # the references' children, kept: oracle.py
    result = evaluator.evaluate(source, problem, get_platform("cpu-cpp"))
    assert result.status is Status.OK and result.generalizes == "yes", result.message
    assert dict(result.phases).get("setup", 0.0) < 0.5  # torch was imported before the job
    (after,) = evaluator.spare_pids()
    assert after != spare and not _alive(spare) and _alive(after)
    assert evaluator.oracle_pids() == oracles and all(map(_alive, oracles))  # the same answered
    other = Evaluator(EvalConfig(baselines=(), spare_child=False))
    assert other.evaluate(source, problem, get_platform("cpu-cpp")).ok
    assert other.spare_pids() == []
    other.close()
    evaluator.close()
    assert evaluator.helper_pids() == [] and not _alive(after)
    assert oracles and not any(map(_alive, oracles))
