"""A held reference's trials kept on the comparisons' device between candidates
(resident.py), and what that relies on: a comparison never changes the reference's tensors."""

from __future__ import annotations

import gc

import pytest
import torch

from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.resident import KEEP, Resident, Trials
from kforge_search.evaluator.verify import compare_outputs


class Ref:  # stands for a Reference: only its identity matters
    pass


def trials(n: int = 2) -> Trials:
    outputs = [[torch.randn(5, 3)] for _ in range(n)]
    return Trials(outputs, [[o[0].double()] for o in outputs], [{} for _ in range(n)])


def test_a_references_trials_are_placed_once_and_kept_for_the_next_candidate():
    resident, ref, held = Resident("cpu", budget=1 << 20), Ref(), trials()
    first = resident.trials(ref, held, size=1000)
    assert resident.trials(ref, held, size=1000) is first
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first.outputs, held.outputs, strict=True))
    assert first.exact is not None and first.exact[1][0].dtype == torch.float64


def test_a_reference_past_the_budget_is_compared_from_where_it_is():
    resident, held = Resident("cpu", budget=999), trials()
    assert resident.trials(Ref(), held, size=1000) is held


def test_the_kept_references_together_stay_within_the_budget():
    resident, a, b = Resident("cpu", budget=1000), Ref(), Ref()
    kept_a = resident.trials(a, trials(), size=600)
    kept_b = resident.trials(b, trials(), size=600)  # a's copies go: 1200 would not fit
    assert resident.trials(b, trials(), size=600) is kept_b
    assert resident.trials(a, trials(), size=600) is not kept_a


def test_only_the_newest_references_are_kept_and_a_new_one_at_a_dead_ones_address_is_new():
    resident = Resident("cpu", budget=1 << 20)
    refs = [Ref() for _ in range(KEEP + 1)]
    kept = [resident.trials(r, trials(), size=10) for r in refs]
    assert resident.trials(refs[-1], trials(), size=10) is kept[-1]
    assert resident.trials(refs[0], trials(), size=10) is not kept[0]  # evicted: placed again
    last = refs[-1]
    address, was = id(last), resident.trials(last, trials(), size=10)
    del refs, last
    gc.collect()
    other = Ref()
    if id(other) == address:  # the allocator may give a new object the dead one's address
        assert resident.trials(other, trials(), size=10) is not was


@pytest.mark.parametrize("far", [False, True])
def test_a_comparison_leaves_the_references_tensors_as_they_were(far):
    """The trials kept on the device are shared by every later candidate's comparison: none
    may change them, whether the candidate matches or not, with NaN and infinities in them."""
    expected = torch.randn(64, 33)
    expected[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
    row = expected.double()
    actual = expected.clone() + (1.0 if far else 0.0)
    before = (expected.clone(), row.clone())
    found = compare_outputs([[expected]], [[actual]], get_policy("strict"), exact=[[row]])
    assert found.ok is (not far)
    assert torch.equal(expected.nan_to_num(), before[0].nan_to_num())
    assert torch.equal(expected.isnan(), before[0].isnan())
    assert torch.equal(row.nan_to_num(), before[1].nan_to_num())
    assert torch.equal(row.isnan(), before[1].isnan())


@pytest.mark.gpu
def test_on_a_gpu_the_trials_are_copied_to_it_once():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run on the device)")
    resident, ref, held = Resident("cuda:0"), Ref(), trials()
    placed = resident.trials(ref, held, size=1000)
    assert placed.outputs[0][0].device.type == "cuda"
    assert resident.trials(ref, held, size=1000).outputs[0][0] is placed.outputs[0][0]
