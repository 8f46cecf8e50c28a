"""Verify stage (parent side): compare candidate outputs with reference outputs, and the
buffers the reference's forward changed (BatchNorm's running statistics in training mode:
evaluator/buffers.py) with the candidate's buffers of the same names.

An element passes when it is within tolerance of the reference's (float32) output, or, for
float32 outputs with a float64 reference, when it is at least as close to the float64
result as the float32 reference is (within SLACK_ULPS) and within tolerance of the float64
result; and every element of an output whose largest distance to the float64 result is
within FLOAT32_MARGIN times the float32 reference's (in that trial, where that is
rounding-sized): a candidate more exact than the reference is never rejected for it, nor one
as exact that rounds differently element by element. On a
wide-range trial atol is in units of the outputs' size there (`atol_scales`).

The outputs come from two different child processes; this module only compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from kforge_search.evaluator.policy import NumericPolicy
from kforge_search.evaluator.result import Correctness, Mismatch

SHOW = 5  # mismatching elements listed in a report


@dataclass(frozen=True)
class Comparison:
    correctness: Correctness
    mismatch: Mismatch | None

    @property
    def ok(self) -> bool:
        return self.mismatch is None


def _fmt(values: Any) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in values.reshape(-1)) + "]"  # 0-d too


SLACK_ULPS = 4  # the float64 rule: "as close as the float32 reference", to a few ulps
# ... or, on an output where the candidate's worst error against the float64 result is within
# this many times the float32 reference's worst error, every element: an honest
# float32 kernel's rounding differs from the reference's element by element, so "closer on
# every element" rejects one as exact half the time where the reference's own error is over
# the tolerance (H100, level2/30: a GEMV whose worst error was a fifth of the reference's
# failed on 2 of 512 elements); a kernel of lower precision (TF32: ~1000x) stays far above it
FLOAT32_MARGIN = 2.0
ROUNDING_SIZE = 1e-3  # the margin holds where that worst error is under this x the output's
# largest value (float32 sums round at ~1e-7..1e-5 of it; a reference off by more is no guide)


@dataclass(frozen=True)
class Elements:
    """One output tensor's comparison: the mismatch, if any, and its errors."""

    mismatch: Mismatch | None
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    by_float64: int = 0  # elements accepted only by the float64 rule


def _distance(a: Any, b: Any) -> Any:
    """|a - b| in float64; equal infinities and NaN against NaN are 0, any other NaN inf."""
    import torch

    diff = (a - b).abs()
    same = (a.isnan() & b.isnan()) | (a.isinf() & (a == b))
    diff = torch.where(same, torch.zeros_like(diff), diff)
    return torch.nan_to_num(diff, nan=float("inf"))


def _float64_rule(a: Any, e: Any, x: Any, atol: float, rtol: float) -> Any:
    """Elements at least as close to the float64 result `x` as the float32 reference `e`
    is (to SLACK_ULPS of float32) and within tolerance of `x`; all of them where the tensor's
    largest distance to `x` is within FLOAT32_MARGIN x the reference's largest."""
    import torch

    finfo = torch.finfo(torch.float32)
    to_exact = _distance(a, x)
    ref_error = _distance(e, x)
    closer = to_exact <= ref_error + SLACK_ULPS * finfo.eps * x.abs() + finfo.tiny
    within = to_exact <= atol + rtol * x.abs()
    finite = torch.isfinite(ref_error) & torch.isfinite(x)
    worst = ref_error[finite].max() if finite.any() else ref_error.new_zeros(())
    scale = x[finite].abs().max() if finite.any() else x.new_zeros(())
    # the candidate's worst error against the reference's, on the whole tensor; only where
    # the reference's error is rounding-sized (not a different computation)
    mine = to_exact[finite].max() if finite.any() else to_exact.new_zeros(())
    as_exact = (worst <= ROUNDING_SIZE * scale) & (mine <= FLOAT32_MARGIN * worst)
    return torch.isfinite(x) & ((closer & within) | as_exact)


def _compare_tensor(
    expected: Any,
    actual: Any,
    policy: NumericPolicy,
    trial: int,
    index: int,
    exact: Any = None,
    atol_scale: float = 1.0,
) -> Elements:
    """One output tensor against the reference's (and the float64 reference's, if given)."""
    import torch

    dtype = str(expected.dtype).removeprefix("torch.")
    atol, rtol = policy.tolerance(dtype)
    atol *= atol_scale
    for reason, want, got in (
        ("shape", tuple(expected.shape), tuple(actual.shape)),
        ("dtype", expected.dtype, actual.dtype),
    ):
        if want != got:
            mismatch = Mismatch(trial, index, reason, str(want), str(got))
            return Elements(mismatch, float("inf"), float("inf"), atol, rtol)
    e = expected.double()
    a = actual.double()
    diff = _distance(a, e)
    size = e.abs().nan_to_num(posinf=0.0)
    bad = diff > atol + rtol * size
    by_float64 = torch.zeros_like(bad)
    usable = exact is not None and dtype == "float32" and tuple(exact.shape) == tuple(e.shape)
    if usable and bad.any():
        x = exact.double()
        by_float64 = bad & _float64_rule(a, e, x, atol, rtol)
        bad = bad & ~by_float64
        diff = torch.where(by_float64, _distance(a, x), diff)
        size = torch.where(by_float64, x.abs(), size)
    significant = size > atol
    rel = (diff[significant] / size[significant]).max().item() if significant.any() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    n_float64 = int(by_float64.sum().item())
    if not bad.any():
        return Elements(None, max_abs, rel, atol, rtol, n_float64)
    where = bad.nonzero()[:SHOW]
    idx = tuple(tuple(int(i) for i in row) for row in where.tolist())
    reason = "nonfinite" if not torch.isfinite(a[bad]).all() else "values"
    mismatch = Mismatch(
        trial=trial,
        output_index=index,
        reason=reason,
        expected=_fmt(e[tuple(where.T)]),
        actual=_fmt(a[tuple(where.T)]),
        indices=idx,
        n_mismatched=int(bad.sum().item()),
        n_total=bad.numel(),
    )
    return Elements(mismatch, max_abs, rel, atol, rtol, n_float64)


def _magnitude(t: Any) -> float:
    """Mean |x| over the finite elements: an output's size, for the wide-range atol."""
    import torch

    if not t.is_floating_point():
        return 0.0
    finite = t.double().abs()[torch.isfinite(t)]
    return finite.mean().item() if finite.numel() else 0.0


def atol_scales(
    expected: Sequence[Sequence[Any]],
    trial_ids: Sequence[int],
    wide: Sequence[int],
    plain: Sequence[int] | None = None,
) -> list[list[float]]:
    """Per compared trial and output, the factor atol is multiplied by: 1, except on a
    wide-range trial, where it is that output's size there over its mean size on the
    `plain` trials (the first distribution's, which the wide ones scale; default: every
    trial that is not wide), at least 1. Errors of honest float32 arithmetic grow with the
    values; relative to the output's size the tolerance stays what it was."""
    base: dict[int, list[float]] = {}
    for tid, outs in zip(trial_ids, expected, strict=True):
        if (tid in plain) if plain is not None else (tid not in wide):
            for i, t in enumerate(outs):
                base.setdefault(i, []).append(_magnitude(t))
    scales = []
    for tid, outs in zip(trial_ids, expected, strict=True):
        row = []
        for i, t in enumerate(outs):
            sizes = base.get(i, [])
            usual = sum(sizes) / len(sizes) if sizes else 0.0
            row.append(max(1.0, _magnitude(t) / usual) if tid in wide and usual > 0 else 1.0)
        scales.append(row)
    return scales


def _compare_buffers(
    expected: dict[str, Any], actual: dict[str, Any], policy: NumericPolicy, trial: int
) -> Mismatch | None:
    """The first of the buffers the reference's forward changed in this trial that the
    candidate lacks or holds another value of."""
    for name in sorted(expected):
        if name not in actual:
            return Mismatch(trial, 0, "missing", "a buffer", "no such buffer", buffer=name)
        mismatch = _compare_tensor(expected[name], actual[name], policy, trial, 0).mismatch
        if mismatch is not None:
            return replace(mismatch, buffer=name)
    return None


def compare_outputs(
    expected: list[list[Any]],
    actual: list[list[Any]],
    policy: NumericPolicy,
    expected_buffers: list[dict[str, Any]] | None = None,
    actual_buffers: list[dict[str, Any]] | None = None,
    *,
    exact: Sequence[Sequence[Any]] | None = None,
    trial_ids: Sequence[int] | None = None,
    wide: Sequence[int] = (),
    plain: Sequence[int] | None = None,
) -> Comparison:
    """Compare per trial: the outputs, then the buffers the reference's forward changed in
    that trial (when given). The first mismatch is reported; errors are maxed over outputs.

    `exact`: per trial, per output, the float64 reference's output (None where there is
    none); `trial_ids`: the trial number of each position (the reference may have dropped
    a wide-range trial); `wide`: the trial numbers of the wide-range trials; `plain`:
    those of the first distribution's (atol_scales)."""
    ids = list(trial_ids) if trial_ids is not None else list(range(len(expected)))
    scales = atol_scales(expected, ids, wide, plain)
    max_abs = max_rel = atol = rtol = 0.0
    passed = by_float64 = 0
    first: Mismatch | None = None
    for pos, (exp, act) in enumerate(zip(expected, actual, strict=False)):
        trial = ids[pos]
        trial_ok = len(exp) == len(act)
        if not trial_ok and first is None:
            first = Mismatch(trial, 0, "count", f"{len(exp)} outputs", f"{len(act)} outputs")
        for index, (e, a) in enumerate(zip(exp, act, strict=False)):
            x = exact[pos][index] if exact is not None and index < len(exact[pos]) else None
            found = _compare_tensor(e, a, policy, trial, index, x, scales[pos][index])
            max_abs, max_rel = max(max_abs, found.max_abs), max(max_rel, found.max_rel)
            atol, rtol = found.atol / scales[pos][index], found.rtol  # the policy's own
            by_float64 += found.by_float64
            if found.mismatch is not None:
                trial_ok = False
                first = first or found.mismatch
        if expected_buffers and pos < len(expected_buffers):
            theirs = actual_buffers[pos] if actual_buffers and pos < len(actual_buffers) else {}
            mismatch = _compare_buffers(expected_buffers[pos], theirs, policy, trial)
            if mismatch is not None:
                trial_ok = False
                first = first or mismatch
        passed += trial_ok
    if len(actual) != len(expected) and first is None:
        first = Mismatch(0, 0, "count", f"{len(expected)} trials", f"{len(actual)} trials")
    correctness = Correctness(
        trials_run=len(expected),
        trials_passed=passed,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        atol=atol,
        rtol=rtol,
        by_float64=by_float64,
    )
    return Comparison(correctness, first)


def compare_timed(
    expected: list[list[Any]],
    actual: list[list[Any]],
    labels: list[str],
    policy: NumericPolicy,
    slack: Sequence[float] = (),
) -> str:
    """ "" when the whole outputs of the timed runs the parent chose match the oracle's,
    else what differs (the first difference). `labels` name each run; `slack`: per output,
    what the reference's own rounding may be off by (its distance to the float64 reference
    on the verification trials), allowed beside atol."""
    if len(actual) != len(expected):
        return f"{len(actual)} timed runs' outputs came back for {len(expected)} chosen"
    for label, exp_run, act_run in zip(labels, expected, actual, strict=True):
        if len(act_run) != len(exp_run):
            return f"{label} returned {len(act_run)} outputs, expected {len(exp_run)}"
        for index, (e, a) in enumerate(zip(exp_run, act_run, strict=True)):
            atol = policy.tolerance(str(e.dtype).removeprefix("torch."))[0]
            extra = slack[index] if index < len(slack) else 0.0
            found = _compare_tensor(e, a, policy, 0, index, None, 1.0 + extra / max(atol, 1e-30))
            if found.mismatch is not None:
                m = found.mismatch
                where = f" at {list(m.indices[:3])}" if m.indices else ""
                return (
                    f"{label}: output {index} differs from the reference's ({m.reason}: "
                    f"expected {m.expected}, got {m.actual}{where})"
                )
    return ""
