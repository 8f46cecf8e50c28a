"""A row pass's plain statistics that read none of an earlier plain statistic's are made in
its walk (triton_kernels.one_walk): a triplet loss's two distances, a cosine similarity's
dot product and norms, a mean beside a maximum. Each walked the row again before (H200:
99_TripletMarginLoss 0.89x -> 1.01x of compile). On Triton's interpreter: the sources make
them in one walk and verify; a statistic that reads an earlier one keeps its own walk.
Cross entropy's target logit is no walk: one load of the row's class column
(triton_kernels.picked), also where the pass runs in parts."""

from __future__ import annotations

import re

import pytest

from kforge_search.agents.builtin import TritonGenome
from tests.agents.builtin.harness import drafted

GENOME = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=0)

CASES = {  # forward, inputs, walks of the row pass's kernel
    "cross_entropy": (
        "return torch.nn.functional.cross_entropy(x, y, ignore_index=3)",
        "[torch.randn(37, 203) * 4.0, torch.randint(0, 203, (37,))]",
        1,
    ),
    "cross_entropy_rand_sum": (
        "return torch.nn.functional.cross_entropy(x, y, reduction='sum')",
        "[torch.rand(29, 131), torch.randint(0, 131, (29,))]",
        1,
    ),
    "triplet": (
        "return torch.nn.functional.triplet_margin_loss(x, y, z, margin=0.5)",
        "[torch.randn(19, 157), torch.randn(19, 157), torch.randn(19, 157)]",
        1,
    ),
    "cosine": (
        "return 1.0 - torch.nn.functional.cosine_similarity(x, y, dim=1)",
        "[torch.rand(21, 143), torch.randn(21, 143)]",
        1,
    ),
    "mean_and_max": ("return x.mean(dim=1) + x.amax(dim=1)", "[torch.randn(17, 301)]", 1),
    "sum_then_its_deviation": (  # the second statistic reads the first: two walks
        "s = x.sum(dim=1, keepdim=True)\nreturn ((x - s) * (x - s)).sum(dim=1)",
        "[torch.randn(23, 149)]",
        2,
    ),
}


def _walks(source: str) -> int:
    """The walks over a row in the row pass's kernel (`for start in range(...)`)."""
    kernel = re.search(r"def _kf_s0_rows\(.*?(?=\n@triton.jit|\Z)", source, re.S)
    assert kernel is not None, source
    return kernel.group(0).count("for start in range(")


@pytest.mark.parametrize("case", list(CASES))
def test_independent_statistics_share_one_walk_and_verify(verify, tmp_path, case):
    forward, inputs, walks = CASES[case]
    problem, draft = drafted(tmp_path, forward, inputs, GENOME)
    assert _walks(draft.source) == walks, draft.source
    result = verify(draft.source, problem)
    assert result.ok, result.message


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropys_target_logit_is_one_load_also_in_parts(verify, tmp_path, reduction):
    forward = f"return torch.nn.functional.cross_entropy(x, y, reduction={reduction!r})"
    inputs = "[torch.randn(3, 1501) * 3.0, torch.tensor([0, 1500, 777])]"  # both ends
    genome = TritonGenome(pass_block=64, pass_programs=1024)  # 3 rows of 24 chunks: parts
    problem, draft = drafted(tmp_path, forward, inputs, genome)
    assert "_part0[(R, " in draft.source, draft.source
    assert "pcol = " in draft.source and "(cols + 0 * row) ==" not in draft.source  # no walk
    result = verify(draft.source, problem)
    assert result.ok, result.message
