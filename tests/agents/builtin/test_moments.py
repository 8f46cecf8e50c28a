"""sum(x) and sum((x - mean)^2) in one walk of a row pass (triton_kernels.moments_pairs:
LayerNorm, InstanceNorm, GroupNorm, BatchNorm, variance): float64 sums of x and x^2, then
sum(x^2) - 2 m sum(x) + n m^2. Two walks read each row twice before the outputs' walk.
Here, on Triton's interpreter, the one walk matches torch where that formula could go
wrong: rows far from zero (mean / std 1e3), constant rows (never a negative variance),
wide spreads, and segmented statistics (GroupNorm)."""

from __future__ import annotations

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import load_candidate
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
GENOME = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=0)


def _rows(shape: tuple[int, ...]) -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(shape)
    flat = x.view(shape[0], -1)
    flat[0] = 1000.0 + 0.5 * flat[0]  # far from zero
    flat[1] = 3.25  # constant: variance 0
    flat[2] = flat[2] * 1e4  # wide
    return x


@pytest.mark.parametrize(
    ("forward", "shape", "init"),
    [
        ("return self.ln(x)", (4, 517), "self.ln = nn.LayerNorm(517)"),
        ("return self.inorm(x)", (3, 2, 19, 23), "self.inorm = nn.InstanceNorm2d(2)"),
        ("return self.gn(x)", (3, 4, 11, 13), "self.gn = nn.GroupNorm(2, 4)"),
        ("return torch.var(x, dim=-1)", (4, 517), ""),
    ],
)
def test_one_walk_matches_torch(verify, tmp_path, forward, shape, init):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, f"[torch.randn{shape}]", init))
    draft = AGENT.synthesize(load_problem(path), get_platform("cpu-triton"), GENOME, "test")
    assert not hasattr(draft, "message"), draft
    assert "s2_acc = s2_acc + xv * xv" in draft.source  # the two sums in one walk
    torch.manual_seed(0)
    model = load_candidate(draft.source, tmp_path / "candidate.py")()
    reference = _reference(forward, init)
    x = _rows(shape)
    got, exact = model(x), reference.double()(x.double())
    mine = (got.double() - exact).abs().max().item()
    torchs = (reference.float()(x).double() - exact).abs().max().item()
    assert torch.isfinite(got).all()
    assert mine <= 2.0 * torchs + 1e-5, (mine, torchs)  # no worse than torch's own float32


def _reference(forward: str, init: str):
    from torch import nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            if init:
                exec(init, {"nn": nn, "self": self})

        def forward(self, x):
            return eval(forward.removeprefix("return "), {"torch": torch, "self": self, "x": x})

    return Model()


def test_the_one_walk_compiles_for_sm90(tmp_path):
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    path = tmp_path / "p.py"
    path.write_text(
        problem_source("return self.ln(x)", "[torch.randn(4, 517)]", "self.ln = nn.LayerNorm(517)")
    )
    report = compile_for_h100(load_problem(path), "strict", tmp_path, GENOME)
    assert "_kf_s0_rows: ok" in report, report


@pytest.mark.parametrize(
    ("forward", "init", "inputs"),
    [
        ("return self.ln(x)", "self.ln = nn.LayerNorm(1501)", "[torch.randn(2, 1501) + 1000.0]"),
        ("return torch.log_softmax(x, dim=-1)", "", "[torch.randn(2, 1501) * 30.0]"),
    ],
)
def test_in_parts_the_one_walk_combines_its_parts(verify, tmp_path, forward, init, inputs):
    """Split into parts (two rows of 23 chunks), each part stores both partial results and
    the last kernel combines them: two kernels, not three, and the same verdict."""
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, inputs, init))
    problem = load_problem(path)
    genome = TritonGenome(pass_block=64, pass_programs=1024)
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert "_part0[(R, " in draft.source and "_part1[(R, " not in draft.source
    result = verify(draft.source, problem)
    assert result.ok, result.message
