from __future__ import annotations

import pytest
import torch

from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.verify import compare_outputs

STRICT = get_policy("strict")


def outputs(*tensors):
    return [[t] for t in tensors]


def test_equal_outputs_pass_with_zero_error():
    x = torch.randn(7, 13)
    result = compare_outputs(outputs(x, x), outputs(x.clone(), x.clone()), STRICT)
    assert result.ok
    assert result.correctness.trials_passed == 2 and result.correctness.max_abs_err == 0


def test_small_error_fails_strict_but_passes_loose():
    x = torch.randn(5, 11)
    y = x + 1e-3
    strict = compare_outputs(outputs(x), outputs(y), STRICT)
    assert not strict.ok and strict.mismatch.reason == "values"
    assert strict.mismatch.n_mismatched > 0 and len(strict.mismatch.indices) <= 5
    assert strict.correctness.max_abs_err == pytest.approx(1e-3, rel=1e-3)
    assert compare_outputs(outputs(x), outputs(y), get_policy("loose")).ok


@pytest.mark.parametrize(
    ("actual", "reason"),
    [
        (torch.zeros(4, 3), "shape"),
        (torch.zeros(3, 4, dtype=torch.float64), "dtype"),
        (torch.full((3, 4), float("nan")), "nonfinite"),
    ],
)
def test_structural_mismatches_are_named(actual, reason):
    result = compare_outputs(outputs(torch.zeros(3, 4)), outputs(actual), STRICT)
    assert not result.ok and result.mismatch.reason == reason


def test_matching_nan_and_inf_are_equal():
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare_outputs(outputs(x), outputs(x.clone()), STRICT).ok


def test_unknown_policy_says_which_exist():
    with pytest.raises(ValueError, match="strict, loose"):
        get_policy("lenient")
