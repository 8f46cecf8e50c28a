"""max(x) and sum(exp(x - max(x))) in one walk of a row pass (triton_kernels.online_pairs:
softmax, log-softmax, cross entropy). The two statistics' walks read each row twice before
the outputs' walk (H200, 23_Softmax 6.1 ms, 0.77x of compile). Here, on Triton's
interpreter, the one walk matches torch where a running maximum could go wrong: rows whose
maximum comes last (every chunk rescales), first, at both ends, -inf elements, a large
spread, a row of one value, and a pass split into parts (each part's maximum and sum)."""

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


def _rows(n: int) -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(8, n)
    x[0] = torch.linspace(-30.0, 30.0, n)  # the maximum grows in every chunk
    x[1] = torch.linspace(30.0, -30.0, n)  # the maximum first
    x[2, 0], x[2, -1] = 50.0, 50.0
    x[3, ::3] = float("-inf")  # -inf elements add nothing
    x[4] = x[4] * 80.0  # a spread where exp underflows for most
    x[5] = 7.0
    x[6, : n // 2] = float("-inf")  # a lane's first elements all -inf
    return x


@pytest.mark.parametrize(
    "forward",
    [
        "return torch.softmax(x, dim=-1)",
        "return torch.log_softmax(x, dim=1)",
        "return torch.logsumexp(x, dim=-1)",
    ],
)
def test_one_walk_matches_torch_on_hard_rows(verify, tmp_path, forward):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, "[torch.randn(8, 517)]"))
    draft = AGENT.synthesize(load_problem(path), get_platform("cpu-triton"), GENOME, "test")
    assert not hasattr(draft, "message"), draft
    assert "m_new = tl.maximum(m_run, tl.max(xm" in draft.source  # the statistics in one walk
    model = load_candidate(draft.source, tmp_path / "candidate.py")()
    x = _rows(517)
    want = eval(forward.removeprefix("return "), {"torch": torch, "x": x.double()})
    got = model(x)
    finite = torch.isfinite(want)
    assert torch.equal(finite, torch.isfinite(got))
    torch.testing.assert_close(got[finite].double(), want[finite], rtol=2e-6, atol=1e-6)


def test_a_pass_in_parts_verifies(verify, tmp_path):
    path = tmp_path / "p.py"
    path.write_text(problem_source("return torch.softmax(x, dim=-1)", "[torch.randn(2, 1501)]"))
    problem = load_problem(path)
    genome = TritonGenome(pass_block=64, pass_programs=1024)
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert "_part0[(R, " in draft.source  # parts (two rows of 23 chunks), and the single
    result = verify(draft.source, problem)  # kernel's one walk for where they are not
    assert result.ok, result.message


def test_the_one_walk_compiles_for_sm90(tmp_path):
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    path = tmp_path / "p.py"
    path.write_text(problem_source("return torch.log_softmax(x, dim=-1)", "[torch.randn(8, 517)]"))
    report = compile_for_h100(load_problem(path), "strict", tmp_path, GENOME)
    assert "_kf_s0_rows: ok" in report, report
