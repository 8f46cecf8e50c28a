"""Verify stage (parent side): compare candidate outputs with reference outputs, and the
buffers the reference's forward changed (BatchNorm's running statistics in training mode:
evaluator/buffers.py) with the candidate's buffers of the same names.

An element passes when it is within tolerance of the reference's (float32) output, or, for
float32 outputs with a float64 reference, when it is at least as close to the float64
result as the float32 reference is (within SLACK_ULPS) and within tolerance of the float64
result; and every element of an output whose largest distance to the float64 result is
within FLOAT32_MARGIN times the float32 reference's (in that trial, where that is
rounding-sized; on a wide-range or shifted trial EDGE_FLOAT32_MARGIN times, whatever its size):
a candidate more exact than the reference is never rejected for it, nor one as exact that
rounds differently element by element. On a wide-range trial atol is in units of the
outputs' size there (`atol_scales`).

Each output is compared piece by piece (`pieces`: runs of slices along dim 0, or parts of
one slice), on the device its reference tensor is on: the same verdict and statistics as the
whole tensor at once, with temporaries of a piece's size (a 4 GiB output's comparison took
about 8 float64 copies of it). The float64 rule's whole-tensor maxima take a pass of their
own, only where some element is off the float32 reference.

The outputs come from two different child processes; this module only compares them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kforge_search.evaluator.out_of_memory import device_oom
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


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in values) + "]"


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
# ... and on the edge trials (wide-range and shifted: Numerics.wide), these. Their inputs push
# an op to where float32 loses digits, and the worst error of an honest float32 result is
# then one draw, heavy-tailed, from the few elements most sensitive to rounding: attention on
# inputs x100 (logits ~1e4, ulp ~1e-3, a near-tie between two keys moves a row by ~0.1-0.9)
# has torch's worst error at up to 2e-3 of the output's largest value, and a kernel as exact
# (tf32x3 or IEEE float32 GEMMs, summed in another order) failed the plain bounds on 1 draw
# in 7, these on 1 in 130 (docs/evaluator.md, test_edge_numerics.py). These trials are there
# for overflow and lost digits (errors orders of magnitude over the reference's); TF32
# operands were 21x or more there, ~1000x on the plain trials, where the bounds stay as above.
# No rounding-size bound on them: where the inputs make float32 itself lose digits, the
# reference's own error is what float32 does there. At KernelBench's published size
# (97_ScaledDotProductAttention: rand x 100, D = 1024, logits ~8e4) torch's worst error
# outgrew the 5e-3 of the output's largest value it once had to stay under, and every honest
# kernel was then judged element by element against the tolerance: INCORRECT (H200).
EDGE_FLOAT32_MARGIN = 16.0

# Elements compared at once: a comparison's float64 temporaries (a dozen) take this x 8 bytes
# each, whatever the output's size (a 32768 x 32768 output is 4 GiB in float32, 8 in float64:
# whole, its comparison took several such copies). On an accelerator the pieces are larger.
PIECE_ELEMENTS = 1 << 22
PIECE_ELEMENTS_DEVICE = 1 << 25


@dataclass(frozen=True)
class Elements:
    """One output tensor's comparison: the mismatch, if any, and its errors."""

    mismatch: Mismatch | None
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    by_float64: int = 0  # elements accepted only by the float64 rule
    dtype: str = ""  # the expected output's, whose tolerances atol and rtol are


def pieces(shape: Sequence[int], limit: int) -> Iterator[tuple[slice, ...]]:
    """Index tuples that cover a tensor of `shape` in C order, each of at most `limit`
    elements: runs of whole slices along dim 0, or, where one slice is larger, single
    slices cut along the next dims in turn (a 1-D run at last). A 0-d tensor is one piece;
    an empty one has none."""
    if len(shape) == 0:
        yield ()
        return
    inner = math.prod(shape[1:])
    if len(shape) == 1 or inner <= limit:
        step = max(1, limit // max(inner, 1))
        for start in range(0, shape[0], step):
            yield (slice(start, min(start + step, shape[0])),)
        return
    for i in range(shape[0]):
        for rest in pieces(shape[1:], limit):
            yield (slice(i, i + 1), *rest)


def _piece_limit(t: Any) -> int:
    return PIECE_ELEMENTS if t.device.type == "cpu" else PIECE_ELEMENTS_DEVICE


def _as_float64(t: Any, piece: tuple[slice, ...], device: Any) -> Any:
    """One piece of `t` in float64 on `device` (a copy of that piece alone, unless `t` is
    float64 on `device` already: then a view of it)."""
    import torch

    return t[piece].to(device=device, dtype=torch.float64)


def _distance(a: Any, b: Any) -> Any:
    """|a - b| in float64; equal infinities and NaN against NaN are 0, any other NaN inf."""

    diff = (a - b).abs_()
    diff.masked_fill_((a == b) | (a.isnan() & b.isnan()), 0.0)  # equal infinities, NaN and NaN
    return diff.nan_to_num_(nan=float("inf"))


def _as_exact(expected: Any, actual: Any, exact: Any, edge: bool = False) -> bool:
    """Whether every element of the output passes the float64 rule for being as exact as the
    float32 reference: where the reference's largest distance to the float64 result `exact`
    (over the elements where both are finite) is rounding-sized against the output's largest
    value there (ROUNDING_SIZE), the candidate's largest distance there is within
    FLOAT32_MARGIN x the reference's; on an `edge` trial, within EDGE_FLOAT32_MARGIN x the
    reference's, whatever its size. Whole-tensor maxima, taken piece by piece."""
    import torch

    worst = scale = mine = 0.0
    device = expected.device
    for piece in pieces(tuple(expected.shape), _piece_limit(expected)):
        e, a = _as_float64(expected, piece, device), _as_float64(actual, piece, device)
        x = _as_float64(exact, piece, device)
        ref_error = _distance(e, x)
        finite = torch.isfinite(ref_error) & torch.isfinite(x)
        if not finite.any():
            continue
        worst = max(worst, ref_error[finite].max().item())
        scale = max(scale, x[finite].abs().max().item())
        mine = max(mine, _distance(a, x)[finite].max().item())
    if edge:  # the reference's own error, however large, is what float32 does here
        return mine <= EDGE_FLOAT32_MARGIN * worst
    return worst <= ROUNDING_SIZE * scale and mine <= FLOAT32_MARGIN * worst


def _float64_rule(a: Any, e: Any, x: Any, atol: float, rtol: float, as_exact: bool) -> Any:
    """Elements at least as close to the float64 result `x` as the float32 reference `e`
    is (to SLACK_ULPS of float32) and within tolerance of `x`; all of them where the tensor
    is as exact as the reference (`as_exact`, of the whole tensor: _as_exact)."""
    import torch

    finfo = torch.finfo(torch.float32)
    to_exact = _distance(a, x)
    ref_error = _distance(e, x)
    closer = to_exact <= ref_error + SLACK_ULPS * finfo.eps * x.abs() + finfo.tiny
    within = to_exact <= atol + rtol * x.abs()
    return torch.isfinite(x) & ((closer & within) | as_exact)


@dataclass
class _Tally:
    """A comparison's statistics, gathered piece by piece (as the whole tensor's would be)."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    n_bad: int = 0
    n_float64: int = 0
    nonfinite: bool = False
    where: list[tuple[int, ...]] = field(default_factory=list)  # the first SHOW mismatches
    expected: list[float] = field(default_factory=list)
    actual: list[float] = field(default_factory=list)


def _tally(
    expected: Any,
    actual: Any,
    exact: Any,
    atol: float,
    rtol: float,
    as_exact: bool | None,
    stop_at_bad: bool = False,
) -> _Tally:
    """Every element against the reference; with `as_exact` not None (the float64 rule
    applies), an element off the float32 reference that passes the float64 rule passes,
    its error measured against the float64 result. `stop_at_bad`: the first piece with a
    mismatch ends it (the float64 rule will be needed: the tally is not complete)."""
    import torch

    tally = _Tally()
    device = expected.device
    for piece in pieces(tuple(expected.shape), _piece_limit(expected)):
        e, a = _as_float64(expected, piece, device), _as_float64(actual, piece, device)
        diff = _distance(a, e)
        size = e.abs().nan_to_num(posinf=0.0)
        bad = diff > atol + rtol * size
        if as_exact is not None and bad.any():
            x = _as_float64(exact, piece, device)
            by_float64 = bad & _float64_rule(a, e, x, atol, rtol, as_exact)
            bad = bad & ~by_float64
            diff = torch.where(by_float64, _distance(a, x), diff)
            size = torch.where(by_float64, x.abs(), size)
            tally.n_float64 += int(by_float64.sum().item())
        if diff.numel():
            rel = torch.where(size > atol, diff / size, 0.0)  # where the output is significant
            tally.max_rel = max(tally.max_rel, rel.max().item())
            tally.max_abs = max(tally.max_abs, diff.max().item())
        n_bad = int(bad.sum().item())
        if not n_bad:
            continue
        tally.n_bad += n_bad
        if stop_at_bad:
            break
        tally.nonfinite = tally.nonfinite or not bool(torch.isfinite(a[bad]).all())
        if len(tally.where) < SHOW:
            local = bad.nonzero()[: SHOW - len(tally.where)]
            at = tuple(local.T)
            offset = torch.tensor([s.start for s in piece] + [0] * (bad.dim() - len(piece)))
            tally.where += [tuple(int(i) for i in row) for row in (local.cpu() + offset).tolist()]
            tally.expected += e[at].reshape(-1).tolist()
            tally.actual += a[at].reshape(-1).tolist()
    return tally


def _compare_tensor(
    expected: Any,
    actual: Any,
    policy: NumericPolicy,
    trial: int,
    index: int,
    exact: Any = None,
    atol_scale: float = 1.0,
    edge: bool = False,
) -> Elements:
    """One output tensor against the reference's (and the float64 reference's, if given),
    piece by piece (`pieces`) on the reference's device: an accelerator's tensors are
    compared there, and no comparison holds more than a few pieces beside its inputs.
    `edge`: the trial is a wide-range or shifted one (the float64 rule's bounds: _as_exact)."""
    dtype = str(expected.dtype).removeprefix("torch.")
    atol, rtol = policy.tolerance(dtype)
    atol *= atol_scale
    for reason, want, got in (
        ("shape", tuple(expected.shape), tuple(actual.shape)),
        ("dtype", expected.dtype, actual.dtype),
    ):
        if want != got:
            mismatch = Mismatch(trial, index, reason, str(want), str(got))
            return Elements(mismatch, float("inf"), float("inf"), atol, rtol, 0, dtype)
    shape = tuple(expected.shape)
    usable = exact is not None and dtype == "float32" and tuple(exact.shape) == shape
    tally = _tally(expected, actual, exact, atol, rtol, None, stop_at_bad=usable)
    if usable and tally.n_bad:  # the float64 rule: its whole-tensor part, then every element
        whole = _as_exact(expected, actual, exact, edge)
        tally = _tally(expected, actual, exact, atol, rtol, whole)
    if not tally.n_bad:
        return Elements(None, tally.max_abs, tally.max_rel, atol, rtol, tally.n_float64, dtype)
    mismatch = Mismatch(
        trial=trial,
        output_index=index,
        reason="nonfinite" if tally.nonfinite else "values",
        expected=_fmt(tally.expected),
        actual=_fmt(tally.actual),
        indices=tuple(tally.where),
        n_mismatched=tally.n_bad,
        n_total=expected.numel(),
    )
    return Elements(mismatch, tally.max_abs, tally.max_rel, atol, rtol, tally.n_float64, dtype)


DEVICE_COMPARE_BYTES = 8 * 2**30  # one comparison's tensors moved to the accelerator at most


def _compared(
    e: Any, a: Any, policy: NumericPolicy, trial: int, index: int, x: Any, scale: float, edge: bool
) -> Elements:
    """_compare_tensor where the tensors are; on the CPU where the accelerator runs out of
    memory for the comparison's temporaries (other evaluators fill it: a bench's jobs, a
    search's actors), the same figures, only slower."""
    import torch

    try:
        return _compare_tensor(e, a, policy, trial, index, x, scale, edge=edge)
    except Exception as exc:
        if not device_oom(exc):
            raise
        host = [t.cpu() if isinstance(t, torch.Tensor) else t for t in (e, a, x)]
        torch.cuda.empty_cache()
        return _compare_tensor(*host[:2], policy, trial, index, host[2], scale, edge=edge)


def placed(values: Any, device: str | None) -> Any:
    """`values` (tensors in lists, tuples and dicts) on `device` for their comparison, where
    one is given and they fit (DEVICE_COMPARE_BYTES); else as they are (on the CPU). On an
    accelerator the comparisons of a level-2 problem at its published size take
    milliseconds where the CPU took seconds per candidate (H100 host: 4-5 s of its verify
    stage). The values come from files the children wrote: only the parent compares."""
    if device is None or _bytes(values) > DEVICE_COMPARE_BYTES:
        return values
    try:
        return moved_to(values, device)
    except RuntimeError:  # out of the device's memory (a timed run beside it, another job)
        return values


def _bytes(values: Any) -> int:
    import torch

    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, dict):
        return sum(_bytes(v) for v in values.values())
    if isinstance(values, list | tuple):
        return sum(_bytes(v) for v in values)
    return 0


def moved_to(values: Any, device: str) -> Any:
    """`values` (tensors in lists, tuples and dicts) copied to `device`, as they are nested."""
    import torch

    if isinstance(values, torch.Tensor):
        return values.to(device)
    if isinstance(values, dict):
        return {k: moved_to(v, device) for k, v in values.items()}
    if isinstance(values, list | tuple):
        return type(values)(moved_to(v, device) for v in values)
    return values


def magnitude(t: Any) -> float:
    """Mean |x| over the finite elements: an output's size, for the wide-range atol."""
    import torch

    if not t.is_floating_point():
        return 0.0
    total, count = 0.0, 0
    for piece in pieces(tuple(t.shape), _piece_limit(t)):
        part = t[piece].to(torch.float64, copy=True).abs_()  # its own: changed in place
        finite = torch.isfinite(part)
        # the others zeroed in place, not left out by a mask (a copy of the kept ones: 2.6x
        # the time on the CPU, the largest part of a streamed reference's reads there)
        total += part.masked_fill_(~finite, 0.0).sum().item()
        count += int(finite.sum().item())
    return total / count if count else 0.0


def largest_difference(a: Any, b: Any) -> float:
    """max |a - b| in float64 over the elements where it is finite (0 where none is), piece
    by piece: the float32 reference's distance to the float64 one (exact.Numerics)."""
    largest = 0.0
    for piece in pieces(tuple(a.shape), _piece_limit(a)):
        far = _as_float64(a, piece, a.device) - _as_float64(b, piece, a.device)  # a new one
        far = far.abs_().nan_to_num_(nan=0.0, posinf=0.0)
        if far.numel():
            largest = max(largest, far.max().item())
    return largest


def all_close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    """torch.allclose(a, b, equal_nan=True) piece by piece, `b` brought to `a`'s device a
    piece at a time (the reference's determinism check: reference_child.run_reference)."""
    import torch

    if tuple(a.shape) != tuple(b.shape):
        return False
    for piece in pieces(tuple(a.shape), _piece_limit(a)):
        near = torch.allclose(a[piece], b[piece].to(a.device), rtol, atol, equal_nan=True)
        if not near:
            return False
    return True


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
    sizes = [[magnitude(t) for t in outs] for outs in expected]
    return scales_of(sizes, trial_ids, wide, plain)


def scales_of(
    sizes: Sequence[Sequence[float]],
    trial_ids: Sequence[int],
    wide: Sequence[int],
    plain: Sequence[int] | None = None,
) -> list[list[float]]:
    """atol_scales from each compared trial's outputs' sizes (`magnitude`), as a streamed
    reference's child measured them (reference_child.streamed_reference_trials)."""
    base: dict[int, list[float]] = {}
    for tid, outs in zip(trial_ids, sizes, strict=True):
        if (tid in plain) if plain is not None else (tid not in wide):
            for i, m in enumerate(outs):
                base.setdefault(i, []).append(m)
    scales = []
    for tid, outs in zip(trial_ids, sizes, strict=True):
        row = []
        for i, m in enumerate(outs):
            known = base.get(i, [])
            usual = sum(known) / len(known) if known else 0.0
            row.append(max(1.0, m / usual) if tid in wide and usual > 0 else 1.0)
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
    scales: Sequence[Sequence[float]] | None = None,
) -> Comparison:
    """Compare per trial: the outputs, then the buffers the reference's forward changed in
    that trial (when given). The first mismatch is reported; errors are maxed over outputs.

    `exact`: per trial, per output, the float64 reference's output (None where there is
    none); `trial_ids`: the trial number of each position (the reference may have dropped
    a wide-range trial); `wide`: the trial numbers of the wide-range and shifted trials
    (atol scaled, the float64 rule's edge bounds); `plain`:
    those of the first distribution's (atol_scales); `scales`: atol's factors per trial
    and output where known (a streamed reference's, compared a trial at a time: merge)."""
    ids = list(trial_ids) if trial_ids is not None else list(range(len(expected)))
    if scales is None:
        scales = atol_scales(expected, ids, wide, plain)
    max_abs = max_rel = atol = rtol = 0.0
    passed = by_float64 = 0
    dtype = ""
    first: Mismatch | None = None
    for pos, (exp, act) in enumerate(zip(expected, actual, strict=False)):
        trial = ids[pos]
        trial_ok = len(exp) == len(act)
        if not trial_ok and first is None:
            first = Mismatch(trial, 0, "count", f"{len(exp)} outputs", f"{len(act)} outputs")
        for index, (e, a) in enumerate(zip(exp, act, strict=False)):
            x = exact[pos][index] if exact is not None and index < len(exact[pos]) else None
            found = _compared(e, a, policy, trial, index, x, scales[pos][index], trial in wide)
            max_abs, max_rel = max(max_abs, found.max_abs), max(max_rel, found.max_rel)
            atol, rtol = found.atol / scales[pos][index], found.rtol  # the policy's own
            dtype = found.dtype
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
        dtype=dtype,
        by_float64=by_float64,
    )
    return Comparison(correctness, first)


def merge(parts: Sequence[Comparison]) -> Comparison:
    """Comparisons of successive trials (each a compare_outputs of one) as one of them all:
    the trials summed, the errors maxed, the first mismatch."""
    if not parts:
        return Comparison(Correctness(0, 0, 0.0, 0.0, 0.0, 0.0), None)
    cs = [p.correctness for p in parts]
    correctness = replace(
        cs[-1],
        trials_run=sum(c.trials_run for c in cs),
        trials_passed=sum(c.trials_passed for c in cs),
        max_abs_err=max(c.max_abs_err for c in cs),
        max_rel_err=max(c.max_rel_err for c in cs),
        by_float64=sum(c.by_float64 for c in cs),
    )
    return Comparison(correctness, next((p.mismatch for p in parts if p.mismatch), None))


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
