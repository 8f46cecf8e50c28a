"""The last pass of a statistic over all rows (one program: a loss's mean over its rows, a
sum of everything) walks the rows' results in long steps of one column
(render_triton.POST_ROWS), not in [128, 32] tiles whose 32 lanes each computed the same
column: 94_MSELoss' 32768 rows took 256 such steps, ~0.2 ms of 2.08 where torch.compile took
1.87 (H200). Here the module's step (_KF_POST_ROWS) is lowered to 16 rows, and an odd count
of rows over two steps verifies on the interpreter."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.agents.builtin.render_triton import POST_ROWS
from kforge_search.platforms import get_platform
from tests.agents.builtin.patterns import make

STEP = 16
ROWS = STEP * 2 + 3

CASES = {
    "mse": ("return torch.nn.functional.mse_loss(A, B)", "torch.randn({r}, 3)",
            "torch.rand({r}, 3)"),
    "huber": ("return torch.nn.functional.smooth_l1_loss(A, B)", "torch.randn({r}, 5)",
              "torch.randn({r}, 5)"),
    "cross_entropy": ("return torch.nn.functional.cross_entropy(A, B)", "torch.randn({r}, 7)",
                      "torch.randint(0, 7, ({r},))"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_statistic_of_all_rows_walks_them_in_long_steps(verify, name):
    forward, a, b = CASES[name]
    problem = make(name, forward, init="pass", params="", args="A, B", init_inputs="[]",
                   inputs=f"[{a.format(r=ROWS)}, {b.format(r=ROWS)}]")  # fmt: skip
    draft = BuiltinAgent().synthesize(
        problem, get_platform("cpu-triton"), TritonGenome(block_m=16, block_n=16), "test"
    )
    assert not hasattr(draft, "message"), draft
    assert "_post[(1, 1)]" in draft.source and "BLOCK_R=_KF_POST_ROWS, BLOCK_C=1," in draft.source
    made = f"_KF_POST_ROWS = {POST_ROWS}\n"
    assert made in draft.source
    result = verify(draft.source.replace(made, f"_KF_POST_ROWS = {STEP}\n"), problem)
    assert result.ok, result.message
