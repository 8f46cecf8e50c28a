"""Numerics (docs/evaluator.md, "Numerics"): the float64 reference and the wide-range trial.

Unit tests of the comparison rule and of the reference child's helpers, then evaluations on
cpu-triton: a softmax without max subtraction is INCORRECT (on the wide-range trial), an
honest float64-accumulating matmul passes where the float32 reference's own rounding error
is over the strict tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.exact import drop_nonfinite, float64_run
from kforge_search.evaluator.inputs import wide_range
from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.verify import (
    atol_scales,
    compare_outputs,
    largest_difference,
    magnitude,
)
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

STRICT = get_policy("strict")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "numerics"


def _large_k_products() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(float32, float64) products A @ B of randn inputs with K = 131072, for seeds where
    the float32 product is off the float64 one by more than the strict tolerance."""
    found = []
    for seed in range(6):
        torch.manual_seed(seed)
        a, b = torch.randn(64, 131072), torch.randn(131072, 64)
        ref32, ref64 = a @ b, a.double() @ b.double()
        if ((ref32.double() - ref64).abs() > 1e-4 + 1e-4 * ref64.abs()).any():
            found.append((ref32, ref64))
    assert found, "premise: float32 sums of 131072 products are off by more than 1e-4 somewhere"
    return found


def test_a_candidate_closer_to_the_float64_result_than_the_reference_passes():
    for ref32, ref64 in _large_k_products():
        exact = ref64.float()  # the float64 product correctly rounded: an honest kernel's
        alone = compare_outputs([[ref32]], [[exact]], STRICT)
        assert not alone.ok  # against the float32 reference alone it was INCORRECT
        judged = compare_outputs([[ref32]], [[exact]], STRICT, exact=[[ref64]])
        assert judged.ok, judged.mismatch
        assert judged.correctness.by_float64 == alone.mismatch.n_mismatched > 0


def test_a_candidate_far_from_both_references_stays_incorrect():
    ref32, ref64 = _large_k_products()[0]
    wrong = ref64.float().clone()
    wrong[3, 5] += 1.0  # outputs reach about +-1500 here: over 1e-4 + 1e-4 x 1500
    found = compare_outputs([[ref32]], [[wrong]], STRICT, exact=[[ref64]])
    assert not found.ok and found.mismatch.indices == ((3, 5),)
    # off from the float64 result by more than the reference is, beyond tolerance: rejected
    worse = (ref64 + 3 * (ref32.double() - ref64) + 2e-4).float()
    assert not compare_outputs([[ref32]], [[worse]], STRICT, exact=[[ref64]]).ok


def test_the_float64_rule_needs_the_candidate_as_close_as_the_reference():
    ref64 = torch.tensor([100.0, 100.0], dtype=torch.float64)
    ref32 = torch.tensor([100.02, 100.0])  # the first element off by 2e-2: over 1e-4 + 1e-2
    closer = torch.tensor([100.005, 100.0])  # 5e-3 from the exact result, nearer than ref32
    # 5e-2 from it: worse than the reference itself, and over twice its worst error (2e-2)
    farther = torch.tensor([99.95, 100.0])
    assert compare_outputs([[ref32]], [[closer]], STRICT, exact=[[ref64]]).ok
    assert not compare_outputs([[ref32]], [[closer]], STRICT).ok
    assert not compare_outputs([[ref32]], [[farther]], STRICT, exact=[[ref64]]).ok
    # within tolerance of the float64 result is also needed: ref32 far off admits nothing
    far = torch.tensor([150.0, 100.0], dtype=torch.float64)
    assert not compare_outputs([[ref32]], [[closer]], STRICT, exact=[[far]]).ok


def test_a_candidate_as_exact_as_the_reference_passes_where_they_round_differently():
    """Two float32 computations of similar accuracy: on some elements the candidate is the
    farther one. Within twice the reference's worst error it passes; a TF32-like error does
    not."""
    ref32, ref64 = _large_k_products()[0]
    err = (ref32.double() - ref64).abs()
    worst = err.max()
    # the reference's error pattern, mirrored and shuffled: as large, elsewhere
    flip = torch.randperm(err.numel(), generator=torch.Generator().manual_seed(0))
    other = (ref64 + (ref32.double() - ref64).reshape(-1)[flip].reshape(ref64.shape) * 1.5).float()
    assert ((other.double() - ref64).abs() > err + 1e-4 + 1e-4 * ref64.abs()).any()  # premise
    assert compare_outputs([[ref32]], [[other]], STRICT, exact=[[ref64]]).ok
    tf32_like = (ref64 + 4 * worst).float()
    assert not compare_outputs([[ref32]], [[tf32_like]], STRICT, exact=[[ref64]]).ok


def test_the_wide_range_trial_scales_atol_by_the_outputs_size():
    plain, wide = torch.randn(50), torch.randn(50) * 100  # a linear op's outputs, x100
    scales = atol_scales([[plain], [wide]], [0, 7], wide=[7], plain=[0])
    assert scales[0] == [1.0] and scales[1][0] == pytest.approx(100, rel=0.5)
    off = wide + 5e-3  # float32-sized error at 100x the values: 5e-5 of the output's size
    assert compare_outputs([[plain], [wide]], [[plain], [off]], STRICT, trial_ids=[0, 7],
                           wide=[7], plain=[0]).ok  # fmt: skip
    assert not compare_outputs([[plain], [wide]], [[plain], [off]], STRICT).ok  # unscaled
    nan = wide.clone()
    nan[0] = float("nan")
    found = compare_outputs([[plain], [wide]], [[plain], [nan]], STRICT, trial_ids=[0, 7],
                            wide=[7], plain=[0])  # fmt: skip
    assert found.mismatch.trial == 7 and found.mismatch.reason == "nonfinite"


def test_wide_range_inputs_by_dtype():
    x = torch.ones(3)
    assert torch.equal(wide_range(x), x * 100)
    assert torch.equal(wide_range(x.half()), x.half() * 16)  # float16 overflows at 65504
    idx = torch.arange(3)
    assert wide_range(idx) is idx


def test_a_wide_trial_whose_reference_is_not_finite_is_dropped():
    ok, inf = [torch.ones(2)], [torch.tensor([1.0, float("inf")])]
    kept = drop_nonfinite([ok, inf, ok, inf, []], [{}, {}, {}, {}, {}], 2, {4: "E: x"}, 1)
    assert kept.trial_ids == [0, 1, 2] and kept.wide == [2] and kept.plain == [0]
    assert kept.dropped == [3, 4]
    assert "trial 3 dropped: the reference's output 0 is not finite" in kept.notes[0]
    assert "trial 4 dropped: the reference raised on it (E: x)" in kept.notes[1]


def test_no_float64_reference_where_the_forward_draws_random_numbers():
    model = torch.nn.Dropout(0.5)
    inputs = [[torch.ones(8)] for _ in range(2)]
    outputs = [[model(x[0])] for x in inputs]
    exact, why, _ = float64_run(model, lambda t: inputs[t], 2, [0, 1], outputs, "cpu", 1.0)
    assert exact is None and "draws random numbers" in why
    linear = torch.nn.Linear(4, 3)
    inputs = [[torch.randn(2, 4)] for _ in range(2)]
    outputs = [[linear(x[0])] for x in inputs]
    exact, why, error = float64_run(linear, lambda t: inputs[t], 2, [1], outputs, "cpu", 1.0, [1])
    assert why == "" and len(exact) == 1 and exact[0][0].dtype == torch.float64
    assert torch.allclose(exact[0][0], outputs[1][0].double(), atol=1e-5)
    assert error == [largest_difference(outputs[1][0], exact[0][0])] and error[0] > 0


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=(), check_unseen=False))


def test_a_softmax_without_max_subtraction_is_incorrect_on_the_wide_trial(evaluator):
    problem = resolve_problem("level1/04_softmax", size_set="ci")
    naive = evaluator.evaluate(FIXTURES / "naive_softmax.py", problem, get_platform("cpu-triton"))
    assert naive.status is Status.INCORRECT, naive.message
    assert naive.artifacts.mismatch.trial == 7 and naive.artifacts.mismatch.reason == "nonfinite"
    assert naive.correctness.trials_passed == 7  # right on every randn-sized trial only
    honest = evaluator.evaluate(EXAMPLES / "triton/softmax.py", problem, get_platform("cpu-triton"))
    assert honest.status is Status.OK, honest.message
    assert honest.correctness.trials_run == 9  # wide and shifted kept: the reference is finite


def test_a_float64_accumulating_matmul_passes_where_the_reference_is_off(evaluator):
    problem = resolve_problem(str(FIXTURES / "large_k_matmul.py"))
    platform = get_platform("cpu-triton")
    ref = evaluator.reference(problem, platform)
    assert ref.numerics.exact is not None and len(ref.numerics.exact) == 9
    result = evaluator.evaluate(FIXTURES / "matmul_float64.py", problem, platform)
    assert result.status is Status.OK, result.message
    # elements outside the strict tolerance of the float32 reference: INCORRECT before
    assert result.correctness.by_float64 > 0
    assert result.correctness.trials_passed == result.correctness.trials_run == 9


def test_the_reference_notes_a_dropped_trial_and_why_it_has_no_float64_run(evaluator, tmp_path):
    exp = tmp_path / "exp.py"  # exp overflows float32 on the wide-range trial
    exp.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.exp(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 32)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    ref = evaluator.reference(resolve_problem(str(exp)), get_platform("cpu-triton"))
    assert ref.numerics.dropped == (7, 8) and ref.numerics.trial_ids == tuple(range(7))
    assert any("wide-range trial 7 dropped" in w for w in ref.warnings)
    assert any("wide-range trial 8 dropped" in w for w in ref.warnings)  # shifted: e^1000
    dropout = resolve_problem("level2/35_gemm_dropout_gelu_scale", size_set="ci")
    ref = evaluator.reference(dropout, get_platform("cpu-triton"))
    assert ref.numerics.exact is None
    assert any("no float64 reference: the forward draws random numbers" in w for w in ref.warnings)


def test_the_child_measures_the_sizes_and_float32_error_the_parent_would(evaluator):
    """Numerics.magnitudes and float32_error come from the reference's child (on its
    device): on the CPU the very numbers the parent took from the outputs before."""
    problem = resolve_problem("level1/04_softmax", size_set="ci")
    ref = evaluator.reference(problem, get_platform("cpu-triton"))
    n = ref.numerics
    assert n.wide and len(n.magnitudes) == len(ref.outputs) == len(n.trial_ids) == 9
    assert n.magnitudes == tuple(tuple(magnitude(t) for t in outs) for outs in ref.outputs)
    ids = list(n.trial_ids)
    assert ref.scales == atol_scales(ref.outputs, ids, n.wide, n.plain)
    assert any(s > 1 for row in ref.scales for s in row)  # a wide trial scales atol
    error = [0.0] * len(ref.outputs[0])
    for pos, tid in enumerate(ids):
        if tid in n.plain:
            for i, (e, x) in enumerate(zip(ref.outputs[pos], n.exact[pos], strict=True)):
                error[i] = max(error[i], largest_difference(e, x))
    assert n.float32_error == tuple(error) and error[0] > 0
