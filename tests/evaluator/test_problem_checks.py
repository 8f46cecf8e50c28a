"""Problems are checked when their reference runs: nondeterminism is an error, degeneracy a warning;
a KernelBench-style directory that is not ours loads and evaluates unchanged."""

from __future__ import annotations

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import ProblemError, find_problems, load_problem
from tests.conftest import FOREIGN_SUITE

FOREIGN = FOREIGN_SUITE

TEMPLATE = """
import time
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {body}

n = 33

def get_inputs():
    return [torch.randn(4, n)]

def get_init_inputs():
    return []
"""

RELU_TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
"""


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=()))


def _problem(tmp_path, body: str):
    path = tmp_path / "p.py"
    path.write_text(TEMPLATE.format(body=body))
    return load_problem(path)


def test_nondeterministic_reference_is_an_error(evaluator, tmp_path):
    # a random factor from the OS, not the seeded generators: two runs agree with odds 2**-32
    # (the clock modulo 997 agreed once in a CI run)
    noise = "int.from_bytes(__import__('os').urandom(4), 'little') / 2**32"
    problem = _problem(tmp_path, f"x * (1 + {noise})")
    with pytest.raises(ProblemError, match="nondeterministic under a fixed seed"):
        evaluator.reference(problem, get_platform("cpu-triton"))


def test_output_that_ignores_inputs_is_flagged_degenerate(evaluator, tmp_path):
    problem = _problem(tmp_path, "torch.ones_like(x) * 3")
    reference = evaluator.reference(problem, get_platform("cpu-triton"))
    assert any("degenerate" in w for w in reference.warnings)


def test_honest_problem_has_no_warnings(evaluator, tmp_path):
    reference = evaluator.reference(_problem(tmp_path, "x * 2"), get_platform("cpu-triton"))
    assert reference.warnings == ()


def test_foreign_kernelbench_directory_loads_and_evaluates(evaluator, tmp_path):
    problems, skipped = find_problems(FOREIGN)
    assert [p.name for p in problems] == ["level1/19_ReLU", "level1/23_Tanh_scaled"]
    assert skipped == []
    relu = problems[0].resized(overrides={"dim": 1000})
    candidate = tmp_path / "relu.py"
    candidate.write_text(RELU_TRITON)
    result = evaluator.evaluate(candidate, relu, get_platform("cpu-triton"))
    assert result.status is Status.OK, result.message
    assert dict(result.sizes)["dim"] == 1000
