"""Verify stage (parent side): compare candidate outputs with reference outputs, and the
buffers the reference's forward changed (BatchNorm's running statistics in training mode:
evaluator/buffers.py) with the candidate's buffers of the same names.

The outputs come from two different child processes; this module only compares them.
"""

from __future__ import annotations

import math
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


def _compare_tensor(expected: Any, actual: Any, policy: NumericPolicy, trial: int, index: int):
    """(mismatch or None, max abs err, max rel err, atol, rtol) for one output tensor."""
    import torch

    dtype = str(expected.dtype).removeprefix("torch.")
    atol, rtol = policy.tolerance(dtype)
    if tuple(actual.shape) != tuple(expected.shape):
        return (
            Mismatch(trial, index, "shape", str(tuple(expected.shape)), str(tuple(actual.shape))),
            float("inf"),
            float("inf"),
            atol,
            rtol,
        )
    if actual.dtype != expected.dtype:
        return (
            Mismatch(trial, index, "dtype", str(expected.dtype), str(actual.dtype)),
            float("inf"),
            float("inf"),
            atol,
            rtol,
        )
    e = expected.double()
    a = actual.double()
    diff = (a - e).abs()
    both_nan = e.isnan() & a.isnan()
    both_inf = e.isinf() & (a == e)
    diff = torch.where(both_nan | both_inf, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=float("inf"))
    bad = diff > atol + rtol * e.abs().nan_to_num(posinf=0.0)
    significant = e.abs() > atol
    rel = (diff[significant] / e.abs()[significant]).max().item() if significant.any() else 0.0
    max_abs = diff.max().item() if diff.numel() else 0.0
    if not bad.any():
        return None, max_abs, rel, atol, rtol
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
    return mismatch, max_abs, rel, atol, rtol


def _compare_buffers(
    expected: dict[str, Any], actual: dict[str, Any], policy: NumericPolicy, trial: int
) -> Mismatch | None:
    """The first of the buffers the reference's forward changed in this trial that the
    candidate lacks or holds another value of."""
    for name in sorted(expected):
        if name not in actual:
            return Mismatch(trial, 0, "missing", "a buffer", "no such buffer", buffer=name)
        mismatch = _compare_tensor(expected[name], actual[name], policy, trial, 0)[0]
        if mismatch is not None:
            return replace(mismatch, buffer=name)
    return None


def compare_outputs(
    expected: list[list[Any]],
    actual: list[list[Any]],
    policy: NumericPolicy,
    expected_buffers: list[dict[str, Any]] | None = None,
    actual_buffers: list[dict[str, Any]] | None = None,
) -> Comparison:
    """Compare per trial: the outputs, then the buffers the reference's forward changed in
    that trial (when given). The first mismatch is reported; errors are maxed over outputs."""
    max_abs = max_rel = atol = rtol = 0.0
    passed = 0
    first: Mismatch | None = None
    for trial, (exp, act) in enumerate(zip(expected, actual, strict=False)):
        trial_ok = len(exp) == len(act)
        if not trial_ok and first is None:
            first = Mismatch(trial, 0, "count", f"{len(exp)} outputs", f"{len(act)} outputs")
        for index, (e, a) in enumerate(zip(exp, act, strict=False)):
            mismatch, abs_err, rel_err, atol, rtol = _compare_tensor(e, a, policy, trial, index)
            max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
            if mismatch is not None:
                trial_ok = False
                first = first or mismatch
        if expected_buffers and trial < len(expected_buffers):
            theirs = actual_buffers[trial] if actual_buffers and trial < len(actual_buffers) else {}
            mismatch = _compare_buffers(expected_buffers[trial], theirs, policy, trial)
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
    )
    return Comparison(correctness, first)


def _close(expected: float, actual: float, atol: float, rtol: float) -> bool:
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    return abs(actual - expected) <= atol + rtol * abs(expected)


def compare_fingerprints(
    expected: list[list[dict[str, Any]]],
    actual: list[list[dict[str, Any]]],
    dtypes: list[str],
    policy: NumericPolicy,
) -> str:
    """ "" when the timed runs' outputs match the reference's, else what differs."""
    if len(actual) != len(expected):
        return f"{len(actual)} timed runs were reported for {len(expected)} run"
    for run, (exp_run, act_run) in enumerate(zip(expected, actual, strict=True)):
        if len(act_run) != len(exp_run):
            return f"timed run {run} returned {len(act_run)} outputs, expected {len(exp_run)}"
        for index, (e, a) in enumerate(zip(exp_run, act_run, strict=True)):
            atol, rtol = policy.tolerance(dtypes[index] if index < len(dtypes) else "float32")
            pairs = list(zip(e["samples"], a["samples"], strict=False))
            if len(pairs) != len(e["samples"]) or not all(
                _close(ev, av, atol, rtol) for ev, av in pairs
            ):
                return f"timed run {run}: output {index} differs from the reference's"
            if not _close(e["mean"], a["mean"], atol + rtol * e["mean_abs"] + 1e-6, 0.0):
                got, want = a["mean"], e["mean"]
                return f"timed run {run}: output {index} has mean {got:.6g}, expected {want:.6g}"
    return ""
