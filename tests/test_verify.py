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


def test_a_zero_dim_output_mismatch_is_reported():
    result = compare_outputs(outputs(torch.tensor(1.0)), outputs(torch.tensor(2.0)), STRICT)
    assert not result.ok and result.mismatch.expected == "[1]" and result.mismatch.actual == "[2]"


# -- buffers the reference's forward changed (training mode) --------------------------------


def stats(mean, steps=1):
    return {"bn.running_mean": mean, "bn.num_batches_tracked": torch.tensor(steps)}


def test_buffers_the_reference_changed_must_match_by_name():
    x, mean = torch.randn(4, 3), torch.randn(3)
    same = compare_outputs(outputs(x), outputs(x), STRICT, [stats(mean)], [stats(mean + 1e-6)])
    assert same.ok
    off = compare_outputs(outputs(x), outputs(x), STRICT, [stats(mean)], [stats(mean + 0.1)])
    assert not off.ok and off.correctness.trials_passed == 0
    assert off.mismatch.buffer == "bn.running_mean" and off.mismatch.reason == "values"
    steps = compare_outputs(outputs(x), outputs(x), STRICT, [stats(mean)], [stats(mean, 0)])
    assert steps.mismatch.buffer == "bn.num_batches_tracked"  # integers: exact


def test_a_missing_buffer_and_an_unreported_trial_are_mismatches():
    x, mean = torch.randn(4, 3), torch.randn(3)
    missing = compare_outputs(
        outputs(x), outputs(x), STRICT, [stats(mean)], [{"bn.running_mean": mean}]
    )
    assert missing.mismatch.reason == "missing"
    assert missing.mismatch.buffer == "bn.num_batches_tracked"
    unreported = compare_outputs(outputs(x, x), outputs(x, x), STRICT, [{}, stats(mean)], [{}])
    assert unreported.mismatch.trial == 1 and unreported.mismatch.reason == "missing"


def test_an_output_mismatch_comes_before_a_buffer_mismatch_of_the_same_trial():
    x, mean = torch.randn(4, 3), torch.randn(3)
    both = compare_outputs(outputs(x), outputs(x + 1), STRICT, [stats(mean)], [{}])
    assert both.mismatch.buffer == "" and both.mismatch.reason == "values"


def test_buffers_the_candidate_changed_but_the_reference_did_not_are_not_compared():
    x, mean = torch.randn(4, 3), torch.randn(3)
    assert compare_outputs(outputs(x), outputs(x), STRICT, [{}], [stats(mean)]).ok
