"""Memory limits scaled to the problem's footprint (evaluator/footprint.py): measured on the
meta device in the reference's child, the limits of every child raised to it above the
configured floor, an actionable refusal where the machine cannot hold the evaluation, a
reference that runs out of memory recorded with the reason, and unseen sizes whose reference
cannot run left unchecked rather than failing the candidate."""

from __future__ import annotations

import types

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator import footprint as fp_mod
from kforge_search.evaluator.footprint import Footprint, GiB
from kforge_search.platforms import get_platform
from kforge_search.problem import ProblemError, load_problem, resolve_problem
from tests.conftest import EXAMPLES

CPU = get_platform("cpu-triton")


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("problem")
    exec(source, module.__dict__)
    return module


# 4096 x 4096 float32 in and out (64 MiB each): 9 trials and their float64 copies, 1.7 GiB
RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        {body}


n = 4096
features = 4096


def get_inputs():
    return [torch.randn(n, features)]


def get_init_inputs():
    return [features]
"""


def _problem(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(RELU.format(body=body))
    return load_problem(str(path))


def test_the_footprint_is_measured_on_the_meta_device():
    module = _module(RELU.format(body="return torch.relu(x * self.scale), x.sum(1).long()"))
    fp = fp_mod.measure(module)
    assert fp == Footprint(64 * 2**20, 64 * 2**20 + 4096 * 8, 64 * 2**20, 4096 * 4)
    # a forward that does not run on meta: outputs estimated as the inputs' size, said so
    module = _module(RELU.format(body="return x[x > 0]"))
    estimated = fp_mod.measure(module)
    assert estimated.outputs == estimated.inputs == 64 * 2**20 and "estimated" in estimated.note
    module = _module(RELU.format(body="return x").replace("nn.Parameter", "undefined_name"))
    assert "NameError" in fp_mod.measure(module)


def test_limits_scale_above_the_floor_within_the_machine(monkeypatch):
    monkeypatch.setattr(fp_mod, "machine_bytes", lambda: 300 * GiB)
    small = Footprint(2**20, 2**20, 2**20, 0)  # its limits stay about the configured one
    # a candidate's child holds one verification trial and 3 kept timed runs, and a working
    # set of 4 x (inputs + outputs): 12 MiB
    assert fp_mod.limit_mb(2048, small, "candidate", "cpu", 9) == 2048 + int(1.25 * 12)
    assert fp_mod.limit_mb(2048, None, "reference", "cpu", 9) == 2048
    assert fp_mod.limit_mb(0, small, "reference", "cpu", 9) == 0  # no limit stays none
    large = Footprint(GiB, 4 * GiB, 4 * GiB, 0)  # a 32768 x 32768 float32 output
    ref = fp_mod.limit_mb(8192, large, "reference", "cuda", 9)
    assert ref == 8192 + int(1.25 * (9 * 12 + 2 + 4) * 1024)  # its trials, working set
    assert fp_mod.limit_mb(8192, large, "candidate", "cuda", 9) < ref
    monkeypatch.setattr(fp_mod, "machine_bytes", lambda: 100 * GiB)
    assert fp_mod.limit_mb(8192, large, "reference", "cuda", 9) == int(0.9 * 100 * 1024)
    assert fp_mod.limit_mb(200_000, large, "reference", "cuda", 9) == 200_000  # configured


def test_a_problem_the_machine_cannot_hold_is_refused_with_what_to_set(monkeypatch, tmp_path):
    monkeypatch.setattr(fp_mod, "machine_bytes", lambda: 64 * GiB)
    problem = resolve_problem("level1/04_softmax")  # 4096 x 16384: 256 MiB in and out
    fp = Footprint(256 * 2**20, 256 * 2**20, 256 * 2**20, 0)
    assert fp_mod.shortfall(problem, fp, "cuda", 9) == ""
    big = Footprint(4 * GiB, 4 * GiB, 4 * GiB, 0)
    why = fp_mod.shortfall(problem, big, "cuda", 9)
    assert why.startswith("at these sizes its evaluation needs about ")
    assert "this machine has 53.60 GiB for it" in why
    assert "--set NAME=VALUE on its sizes (batch_size=4096, dim=16384), or --sizes ci" in why
    at_ci = problem.resized("ci")
    assert "--sizes" not in fp_mod.sizes_hint(at_ci) and "dim=1000" in fp_mod.sizes_hint(at_ci)
    assert fp_mod.device_shortfall(problem, big, 10 * GiB, 80 * GiB) == ""
    assert fp_mod.device_shortfall(problem, big, 6 * GiB, 80 * GiB).startswith(
        "one call needs at least 8.00 GiB of device memory"
    )


def test_on_cuda_a_streamed_reference_counts_what_reaches_the_host(monkeypatch):
    """37_FrobeniusNorm at its published size (7 GiB in and out, float32): on CUDA against a
    streamed reference the outputs stay on the device (CUDA IPC, compared in the oracle);
    only the paths that copy to the host count. Refused before on a 128 GB H100 host (126
    GiB estimated: the parent's copy of a trial, every child's outputs on the host)."""
    fp = Footprint(7 * GiB, 7 * GiB, 7 * GiB, 0)

    def need(mode: str, device: str = "cuda") -> float:
        return fp_mod.need_bytes(fp, mode, device, 9, stream=True) / GiB

    # the oracle: its trial's outputs and the candidate's host copy (2 x 7), a float64 run
    # moved to the host: inputs in float32 and float64 (3 x 7), float64 outputs (2 x 7)
    assert need("oracle") == need("reference") == 2 * 7 + 3 * 7 + 2 * 7
    # the candidate: inputs drawn on the host (2 x 7), one timed run and one burst call
    # copied there where they cannot be shared (2 x 7); its kept timed runs stay on device
    assert need("candidate") == 2 * 7 + 2 * 7
    assert need("baseline") == need("ncu") == 2 * 7  # inputs drawn on the host only
    # the parent holds none of it: the oracle beside the candidate's child
    assert fp_mod.machine_need(fp, "cuda", 9, True) == (49 + 28) * GiB
    # a 125.87 GiB host (109.28 GiB for an evaluation): it fits now, and on the CPU it does not
    monkeypatch.setattr(fp_mod, "machine_bytes", lambda: int((109.28 * GiB + 4 * GiB) / 0.9))
    problem = resolve_problem("level1/04_softmax")
    assert fp_mod.shortfall(problem, fp, "cuda", 9, stream=True) == ""
    why = fp_mod.shortfall(problem, fp, "cpu", 9, stream=True)
    assert "needs about 196.00 GiB of host memory" in why  # the CPU's estimate unchanged
    assert need("candidate", "cpu") == 84 and need("oracle", "cpu") == 84
    monkeypatch.setattr(fp_mod, "machine_bytes", lambda: 64 * GiB)  # too small: says why
    why = fp_mod.shortfall(problem, fp, "cuda", 9, stream=True)
    assert "needs about 77.00 GiB" in why and "compare it on the host" in why
    # kept (not streamed) on CUDA: the CPU-shaped estimate as it was
    assert fp_mod.need_bytes(fp, "candidate", "cuda", 9) == 49 * GiB


def test_on_cuda_streamed_small_outputs_and_parameters_are_counted_too():
    """Outputs of 64 MiB: 4 timed runs and 2 burst calls are checked (timed_check.
    reveal_counts), each copied to the host where it cannot be shared; the parent keeps
    each trial's changed buffers (at most the parameters' size)."""
    mib = 2**20
    fp = Footprint(32 * mib, 64 * mib, 64 * mib, 16 * mib)
    assert fp_mod.need_bytes(fp, "candidate", "cuda", 9, True) == (2 * 32 + 6 * 64) * mib
    trial = 2 * 64 + (3 * 32 + 2 * 64 + 2 * 16)  # outputs, candidate's, float64 on the host
    runs = 6 * 64 + 64 + 2 * 32  # the chosen runs read, the reference's run, inputs drawn
    assert fp_mod.need_bytes(fp, "oracle", "cuda", 9, True) == max(trial, runs) * mib
    beside = max(trial, runs) + 2 * 32 + 6 * 64
    assert fp_mod.machine_need(fp, "cuda", 9, True) == (9 * 16 + beside) * mib


def test_a_reference_beyond_the_configured_limit_runs_with_its_scaled_one(tmp_path):
    """1.7 GiB of reference outputs and float64 copies: past a 600 MiB limit (killed or out
    of memory there before), within the limit scaled to its footprint."""
    problem = _problem(tmp_path, "relu", "return torch.relu(x * self.scale)")
    config = EvalConfig(
        baselines=(), memory_limit_mb=600, check_unseen=False, reference_keep_mb=4096
    )  # kept whole (test_streamed_reference: not)
    evaluator = Evaluator(config)
    try:
        ref = evaluator.reference(problem, CPU, oracle=False)
    finally:
        evaluator.close()
    assert ref.footprint == Footprint(64 * 2**20, 64 * 2**20, 64 * 2**20, 4096 * 4)
    assert ref.numerics.exact is not None and len(ref.outputs) == 9
    assert ref.held_bytes >= 9 * 3 * 64 * 2**20
    job = evaluator._job("candidate", problem, CPU, tmp_path, ref.footprint)
    assert job.memory_limit_mb > 600  # a candidate's limit scales too


def test_a_reference_out_of_memory_says_so_and_what_to_set(tmp_path):
    """A forward whose temporary (not in the footprint) is past the limit: the reason, not a
    traceback's last line alone."""
    problem = _problem(tmp_path, "greedy", "return x + torch.empty(2**33).sum()")
    evaluator = Evaluator(EvalConfig(baselines=(), memory_limit_mb=2048, check_unseen=False))
    try:
        with pytest.raises(ProblemError) as raised:
            evaluator.reference(problem, CPU, oracle=False)
    finally:
        evaluator.close()
    message = str(raised.value)
    assert message.startswith("greedy: the reference ran out of host memory (one call's inputs")
    assert "can't allocate memory" in message and "--set NAME=VALUE on its sizes" in message


def test_unseen_sizes_whose_reference_fails_are_left_unchecked(tmp_path):
    source = (resolve_problem("level1/04_softmax").source).replace(
        "return torch.softmax(x, dim=1)",
        "if x.shape[1] == 777:\n            raise RuntimeError('not at 777')\n"
        "        return torch.softmax(x, dim=1)",
    )
    path = tmp_path / "softmax_777.py"
    path.write_text(source)
    problem = load_problem(str(path), size_set="ci")
    evaluator = Evaluator(EvalConfig(baselines=()))
    try:
        for _ in range(2):  # the second time from memory: the unseen reference is not run again
            result = evaluator.evaluate(EXAMPLES / "triton/softmax.py", problem, CPU)
            assert result.status is Status.OK, result.message
            assert result.generalizes == "unchecked"
            notes = [w for w in result.warnings if "unseen sizes are not checked" in w]
            assert len(notes) == 1 and "not at 777" in notes[0], result.warnings
    finally:
        evaluator.close()
