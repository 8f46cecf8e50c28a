"""GPU platforms (cuda-triton, cuda-cpp): run with the `gpu` marker on the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import BROKEN, EXAMPLES

pytestmark = pytest.mark.gpu

HONEST = [
    ("cuda-triton", "triton/elementwise_chain.py", "level1/10_elementwise_chain", "unseen"),
    ("cuda-triton", "triton/softmax.py", "level1/04_softmax", "unseen"),
    ("cuda-triton", "triton/gemm_bias_relu.py", "level2/01_gemm_bias_relu", "ci"),
    ("cuda-triton", "triton/gemm_bias_relu.py", "level2/01_gemm_bias_relu", "unseen"),
    ("cuda-triton", "triton/gemm_gelu_scale.py", "level2/02_gemm_gelu_scale", "unseen"),
    ("cuda-cpp", "cuda_cpp/elementwise_chain.py", "level1/10_elementwise_chain", "unseen"),
    ("cuda-cpp", "cuda_cpp/softmax.py", "level1/04_softmax", "unseen"),
    ("cuda-cpp", "cuda_cpp/gemm_bias_relu.py", "level2/01_gemm_bias_relu", "unseen"),
]


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=("eager",)))


@pytest.mark.parametrize(("platform", "candidate", "problem", "size_set"), HONEST)
def test_honest_gpu_candidate_verifies_and_times(evaluator, platform, candidate, problem, size_set):
    result = evaluator.evaluate(
        EXAMPLES / candidate, resolve_problem(problem, size_set=size_set), get_platform(platform)
    )
    assert result.status is Status.OK, result.message
    assert result.device_name.startswith("NVIDIA")
    assert result.timing.method == "cuda_events" and result.timing.runs >= 50
    assert result.timing.meaningful
    assert result.speedup("eager") is not None


def test_wrong_values_are_incorrect_on_gpu(evaluator):
    result = evaluator.evaluate(
        BROKEN / "triton/wrong_values.py",
        resolve_problem("level1/10_elementwise_chain", size_set="ci"),
        get_platform("cuda-triton"),
    )
    assert result.status is Status.INCORRECT
    assert result.artifacts.mismatch is not None


def test_cuda_fault_is_a_runtime_error_and_the_next_candidate_works(evaluator, tmp_path):
    bad = tmp_path / "oob.py"
    # An out-of-bounds read far past the allocation: an illegal memory access.
    bad.write_text(
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\n"
        "def oob(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs * 1000000007))\n\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n"
        "        out = torch.empty_like(x)\n"
        "        oob[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)\n"
        "        return out\n"
    )
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    result = evaluator.evaluate(bad, problem, get_platform("cuda-triton"))
    assert result.status is Status.RUNTIME_ERROR, result.message
    honest = evaluator.evaluate(
        EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cuda-triton")
    )
    assert honest.status is Status.OK


SPIN = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def spin(flag_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    value = tl.load(flag_ptr, volatile=True)
    while value == 0.0:  # the flag is never set: the kernel never ends
        value = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr + offs, value, mask=offs < n)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        flag = torch.zeros(1, device=x.device)
        spin[(triton.cdiv(x.numel(), 256),)](flag, out, x.numel(), BLOCK=256)
        return out
"""


def test_gpu_kernel_that_never_ends_times_out_and_the_gpu_recovers(tmp_path):
    evaluator = Evaluator(EvalConfig(baselines=(), verify_timeout_s=30, check_unseen=False))
    path = tmp_path / "spin.py"
    path.write_text(SPIN)
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    result = evaluator.evaluate(path, problem, get_platform("cuda-triton"))
    assert result.status is Status.TIMEOUT and result.stage == "verify", result.message
    honest = evaluator.evaluate(
        EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cuda-triton")
    )
    assert honest.status is Status.OK, honest.message


SYNTHESIZED = [
    ("level2/01_gemm_bias_relu", "strict", ("tf32x3", "ieee")),  # fused elementwise epilogue
    ("level2/16_gemm_layernorm_relu", "strict", ("tf32x3", "ieee")),  # row statistics
    ("level2/17_gemm_groupnorm_swish", "loose", ("tf32", "tf32x3", "bf16", "ieee")),  # segments
    ("level2/21_mlp_two_gemm_relu", "loose", ("tf32", "tf32x3", "bf16", "ieee")),  # two GEMMs
]


@pytest.mark.parametrize(("problem", "policy", "admissible"), SYNTHESIZED)
def test_builtin_agent_kernels_verify_and_generalize_on_the_gpu(problem, policy, admissible):
    """The builtin synthesizer's seed draft at the problem's full sizes, through the evaluator."""
    from kforge_search.agents.base import Context
    from kforge_search.agents.builtin import BuiltinAgent

    platform = get_platform("cuda-triton")
    prob = resolve_problem(problem)
    (draft,) = BuiltinAgent().propose(Context(prob, platform, policy))
    assert draft.precision in admissible
    result = Evaluator(EvalConfig(policy=policy, baselines=("eager",))).evaluate_source(
        draft.source, prob, platform
    )
    assert result.status is Status.OK, result.message
    assert result.generalizes == "yes"
    assert result.timing.meaningful and result.speedup("eager") is not None


@pytest.mark.parametrize("loads", ["tma", "pointer"])
def test_presplit_tf32x3_passes_strict_on_the_tensor_cores(loads):
    """tf32x3 with the weight split once and the tensor cores' partial sum promoted to fp32
    every 2 k blocks. Their accumulator rounds toward zero (docs/synthesizer.md, "tf32x3"),
    which the interpreter does not: only real tensor cores at K = 8192 can show it."""
    from kforge_search.agents.builtin import BuiltinAgent, TritonGenome

    platform = get_platform("cuda-triton")
    prob = resolve_problem("level2/02_gemm_gelu_scale")
    genome = TritonGenome(block_k=32, precision="tf32x3", x3="presplit", promote=2, loads=loads)
    draft = BuiltinAgent().synthesize(prob, platform, genome, "presplit tf32x3")
    assert "_kf_pair" in draft.source
    result = Evaluator(EvalConfig(policy="strict", baselines=())).evaluate_source(
        draft.source, prob, platform
    )
    assert result.status is Status.OK, result.message


@pytest.mark.parametrize(
    ("platform", "candidate"),
    [("cuda-triton", "triton/gemm_bias_relu.py"), ("cuda-cpp", "cuda_cpp/gemm_bias_relu.py")],
)
def test_profile_stage_times_device_kernels_and_reads_ncu(platform, candidate):
    from kforge_search.agents.base import Draft, Parent
    from kforge_search.agents.llm.analyst import Analyst
    from kforge_search.evaluator import ncu

    problem = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
    plat = get_platform(platform)
    evaluator = Evaluator(EvalConfig(baselines=(), profile=True, check_unseen=False))
    result = evaluator.evaluate(EXAMPLES / candidate, problem, plat)
    assert result.status is Status.OK, result.message
    profile = result.profile
    assert profile is not None and profile.tool == "torch.profiler", result.warnings
    device = [k for k in profile.kernels if k.where == "device"]
    assert device and all(k.total_us > 0 for k in device), profile
    assert profile.kernel_us_per_call <= profile.wall_us_per_call * 1.05
    assert {s.lane for s in profile.timeline} == {"host", "device"}
    if ncu.available():  # on the device it is: one call's kernels with their metrics
        assert profile.ncu, profile.notes
        first = profile.ncu[0]
        assert any(k.startswith("Duration") for k, _ in first.metrics), first.metrics
    report = Analyst().report(problem, plat, "strict", Parent(Draft("", platform, "x", ""), result))
    assert not isinstance(report, str) and "us/call" in report.digest
    print(report.digest, report.analysis.text(), sep="\n")  # shown with -s on the device


ADVERSARIAL = Path(__file__).parent / "adversarial" / "candidates"
ORACLE_CASES = [  # (platform, candidate, problem, the reason it is rejected for: "" is OK)
    ("cuda-triton", EXAMPLES / "triton/gemm_bias_relu.py", "level2/01_gemm_bias_relu", ""),
    ("cuda-cpp", EXAMPLES / "cuda_cpp/gemm_bias_relu.py", "level2/01_gemm_bias_relu", ""),
    ("cuda-triton", ADVERSARIAL / "30a_precomputed_timing_inputs.py",
     "level1/10_elementwise_chain", "timing:stale-output"),
]  # fmt: skip


@pytest.mark.parametrize(("platform", "candidate", "problem", "reason"), ORACLE_CASES)
def test_the_oracle_compares_chosen_runs_shared_over_cuda_ipc(
    platform, candidate, problem, reason, monkeypatch
):
    """EvalConfig.timed_check_in_oracle on a GPU: the chosen timed runs' outputs go to the
    oracle as CUDA IPC handles and it compares them against a held reference (no file of
    outputs on either side); an honest kernel stays OK, a stale one is caught."""
    from kforge_search.evaluator.oracle import Oracle

    asked: list[str] = []
    real = Oracle.compare_runs

    def compare_runs(self, spec):
        asked.append(spec.path)
        return real(self, spec)

    monkeypatch.setattr(Oracle, "compare_runs", compare_runs)
    made = Evaluator(EvalConfig(baselines=(), timed_check_in_oracle=True))
    try:
        result = made.evaluate(
            candidate, resolve_problem(problem, size_set="ci"), get_platform(platform)
        )
    finally:
        made.close()
    if reason:
        assert result.status is Status.REJECTED, result.message
        assert result.artifacts.reasons == (reason,), result.message
    else:
        assert result.status is Status.OK and result.timing.meaningful, result.message
    assert asked, "the chosen runs were not compared in the oracle"


HELD_CASES = [  # (candidate, problem, status): a held reference's trials compared in its oracle
    (EXAMPLES / "triton/gemm_bias_relu.py", "level2/01_gemm_bias_relu", Status.OK),
    (BROKEN / "triton/wrong_values.py", "level1/10_elementwise_chain", Status.INCORRECT),
]


@pytest.mark.parametrize(("candidate", "problem", "status"), HELD_CASES)
def test_the_oracle_keeps_a_held_references_trials_and_compares_them(
    candidate, problem, status, monkeypatch
):
    """EvalConfig.trials_in_oracle on a GPU: the verification trials' outputs go to the
    oracle as CUDA IPC handles, and it compares them against the held reference's trials,
    sent to it once (oracle_held.py); the parent compares none of them itself. An honest
    kernel stays OK at the problem's and the unseen sizes; wrong values are INCORRECT."""
    from kforge_search.evaluator.oracle import Oracle
    from kforge_search.evaluator.trial_check import TrialCheck

    sent: list[int] = []
    real = Oracle.hold_trials

    def hold_trials(self, trials, size):
        if not self.held:  # written for this oracle now
            sent.append(size)
        return real(self, trials, size)

    def held(self, pos, path):
        raise AssertionError("the parent compared a held trial itself")

    monkeypatch.setattr(Oracle, "hold_trials", hold_trials)
    monkeypatch.setattr(TrialCheck, "_held", held)
    made = Evaluator(EvalConfig(baselines=(), trials_in_oracle=True))
    try:
        plat = get_platform("cuda-triton")
        prob = resolve_problem(problem, size_set="ci")
        result = made.evaluate(candidate, prob, plat)
        again = made.evaluate(candidate, prob, plat)  # the oracle keeps what it was sent
    finally:
        made.close()
    assert result.status is status and again.status is status, result.message
    if status is Status.OK:
        assert result.generalizes == "yes" and result.correctness.trials_passed >= 5, result
        assert len(sent) == 2 and all(sent), sent  # the problem's sizes and the unseen ones
    else:
        assert result.artifacts.mismatch is not None
        assert len(sent) == 1, sent
