"""Row offsets in int32 where every offset a kernel forms fits (render_triton._wide: rows
plus a tile's, times the longest row the kernel indexes, below the module's _KF_NARROW),
else int64 (WIDE=True). H200, at published sizes: 26_GELU 3.36 -> 3.22 ms and 47_Sum 2.16
-> 2.11 with int32 offsets. On Triton's interpreter each family gives torch's result both
ways: as the sizes make it (narrow) and with _KF_NARROW lowered to 1 (wide)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.agents.builtin.agent import seed_genome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import outputs_with_constants
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
CPU = get_platform("cpu-triton")

CASES = [  # (name, forward, input shape, init, the kernels that take WIDE)
    ("gelu", "return F.gelu(x) * 2.0", (37, 130), "", ("_kf_s0_gemm",)),
    ("sum_rows", "return torch.sum(x, dim=-1)", (37, 130), "", ("_kf_s0_rows",)),
    ("sum_mid", "return torch.sum(x, dim=1)", (5, 37, 33), "", ("_kf_s0_cols",)),
    ("softmax", "return torch.softmax(x, dim=-1)", (37, 130), "", ("_kf_s0_rows",)),
    ("layernorm", "return self.ln(x)", (9, 5, 50), "self.ln = nn.LayerNorm(50)", ("_kf_s0_",)),
]


@pytest.mark.parametrize(
    ("name", "forward", "shape", "init", "kernels"), CASES, ids=[c[0] for c in CASES]
)
@pytest.mark.parametrize("narrow", [2**31, 1])
def test_offsets_narrow_and_wide(tmp_path: Path, name, forward, shape, init, kernels, narrow):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, f"[torch.randn{shape}]", init))
    problem = load_problem(path)
    genome = seed_genome(AGENT.plan(problem), CPU, "strict")
    draft = AGENT.synthesize(problem, CPU, genome, "test")
    assert not hasattr(draft, "message"), draft
    launches = [line for line in draft.source.splitlines() if "WIDE=" in line]
    assert any(k in line for line in launches for k in kernels), launches
    got, want = outputs_with_constants(draft.source, problem, tmp_path, shape, _KF_NARROW=narrow)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_wide_where_a_row_offset_may_pass_int32():
    from types import SimpleNamespace

    from kforge_search.agents.builtin.render_triton import _wide

    expr = _wide(["t0", "t0.shape[-1]", "b1", "b1.shape[-1]", "R"])
    for rows, lengths, wide in [
        (4096, (393216, 393216), False),  # 19_ReLU: 1.6e9 elements, int32 offsets
        (5461, (393216, 1), True),  # 2.15e9 elements (with a tile's rows past the end)
        (2**20, (2047, 2049), True),  # the longer row decides
        (2**20, (2047, 1), False),
    ]:
        names = {
            "R": rows,
            "t0": SimpleNamespace(shape=(rows, lengths[0])),
            "b1": SimpleNamespace(shape=(rows, lengths[1])),
            "_KF_NARROW": 2**31,
        }
        assert eval(expr, names) is wide, (rows, lengths)
    assert eval(_wide(["b2", "R"]), {"R": 2**31 - 256, "_KF_NARROW": 2**31}) is True
