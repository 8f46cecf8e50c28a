"""A row pass over many short rows walks several rows in each program (rows.py.j2's RPP;
the generated module's _KF_RPP, _KF_SHORT_ROW and _KF_MANY_ROWS say when). 37_Frobenius'
3.7 M rows of 512 ran one program each, at 16% of torch.compile (H200). Here, on Triton's
interpreter, the module's thresholds are lowered so that small programs take RPP > 1, with a
row count that RPP does not divide: each family of row statistics gives torch's result."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import outputs_with_constants
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
GENOME = TritonGenome(
    block_m=16, block_n=64, pass_block=64, pass_programs=0, placement="second_pass"
)  # the row pass runs (not fused into the tile where it spans the row)

CASES = [  # (name, forward, input shape, init)
    ("sum", "return torch.sum(x * x, dim=-1)", (37, 50), ""),
    ("softmax", "return torch.softmax(x, dim=-1)", (37, 50), ""),
    ("log_softmax", "return torch.log_softmax(x, dim=1)", (37, 130), ""),
    ("layernorm", "return self.ln(x)", (9, 5, 50), "self.ln = nn.LayerNorm(50)"),
    ("cumsum", "return torch.cumsum(x, dim=1)", (37, 130), ""),
    ("argmax", "return torch.argmax(x, dim=1)", (37, 130), ""),
    ("groupnorm", "return self.gn(x)", (7, 6, 5, 9), "self.gn = nn.GroupNorm(3, 6)"),
    ("frobenius", "return x / torch.norm(x, p='fro')", (5, 7, 3, 40), ""),
]


@pytest.mark.parametrize(("name", "forward", "shape", "init"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("rpp", [1, 4])
def test_several_rows_per_program(tmp_path: Path, name, forward, shape, init, rpp):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, f"[torch.randn{shape}]", init))
    problem = load_problem(path)
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), GENOME, "test")
    assert not hasattr(draft, "message"), draft
    assert "RPP=rpp" in draft.source, "no row pass: the case tests nothing"
    # every row pass: rpp rows per program
    got, want = outputs_with_constants(
        draft.source, problem, tmp_path, shape, _KF_RPP=rpp, _KF_MANY_ROWS=1
    )
    if want.dtype == torch.int64:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
