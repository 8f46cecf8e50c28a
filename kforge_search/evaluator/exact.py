"""The reference's numerics (docs/evaluator.md, "Numerics"): its wide-range trials and its
float64 run.

In the reference's child (reference_child.run_reference): a wide-range trial (inputs.wide_range)
whose outputs or changed buffers are not finite is dropped (`drop_nonfinite`), and where
outputs are float32 the Model runs again in float64 (`float64_run`: built as the
reference's, `model.double()`, every trial's inputs in float64, in the same order, so
training-mode state follows the float32 run's). In the parent: `Numerics`, what a
candidate's outputs are compared with besides the reference's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_search.evaluator.out_of_memory import device_oom
from kforge_search.evaluator.verify import largest_difference

FLOAT64_BUDGET = 8.0  # the float64 run stops past max(FLOAT64_MIN_S, this x the float32 run)
FLOAT64_MIN_S = 10.0


@dataclass(frozen=True)
class Numerics:
    """The reference's trials as compared: which (a dropped wide-range trial is not run by
    candidates), which of them are wide-range, their float64 outputs, and notes (a trial
    dropped, why there is no float64 reference)."""

    trial_ids: tuple[int, ...] = ()  # empty: every trial, in order
    wide: tuple[int, ...] = ()
    plain: tuple[int, ...] = ()  # the first distribution's trials, which wide ones scale
    dropped: tuple[int, ...] = ()
    exact: list[list[Any]] | None = None  # per compared trial, per output; None: none
    notes: tuple[str, ...] = ()
    # per output, the float32 reference's largest distance to the float64 one on the plain
    # trials: the timed runs' check (first-distribution inputs) allows it beside atol
    float32_error: tuple[float, ...] = ()
    # per compared trial, per output: its size (verify.magnitude), which scales atol on the
    # wide-range trials (verify.scales_of); measured by the child, on its device
    magnitudes: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def from_event(cls, event: dict[str, Any], exact: list[list[Any]] | None) -> Numerics:
        """From the reference child's "reference" event (or, streamed, its "streamed"
        part: float32_error and magnitudes) and its float64 outputs."""
        kept = event.get("trials") or {}
        measured = event.get("streamed") or event
        return cls(
            trial_ids=tuple(kept.get("trial_ids", ())),
            wide=tuple(kept.get("wide", ())),
            plain=tuple(kept.get("plain", ())),
            dropped=tuple(kept.get("dropped", ())),
            exact=exact,
            notes=tuple(kept.get("notes", ())),
            float32_error=tuple(measured.get("float32_error", ())),
            magnitudes=tuple(tuple(row) for row in measured.get("magnitudes", ())),
        )

    def compare_args(self) -> dict[str, Any]:
        """verify.compare_outputs' keyword arguments."""
        return {"exact": self.exact, "trial_ids": self.trial_ids or None, "wide": self.wide,
                "plain": self.plain or None}  # fmt: skip

    def save_for_child(
        self,
        outputs: list[list[Any]],
        buffers: list[dict[str, Any]],
        scales: list[list[float]],
        folder: Path,
        name: str = "reference.pt",
    ) -> str:
        """Saves what a baseline child checks its kinds against (peers.check_kind), with
        atol's `scales` for it (Reference.scales: not computed again there), as `name` in
        `folder`; its path."""
        import torch

        path = folder / name
        ids = list(self.trial_ids or range(len(outputs)))
        torch.save({"outputs": outputs, "buffers": buffers, "exact": self.exact,
                    "trial_ids": ids, "wide": list(self.wide),
                    "plain": list(self.plain) or None, "scales": scales}, path)  # fmt: skip
        return str(path)


@dataclass(frozen=True)
class Kept:
    """The child's verdict on its trials: kept ids, the wide ones and the first
    distribution's among them, the dropped ones and why."""

    trial_ids: list[int]
    wide: list[int]
    plain: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _nonfinite(outputs: Sequence[Any], buffers: dict[str, Any]) -> str:
    import torch

    for i, t in enumerate(outputs):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return f"output {i}"
    for name, t in sorted(buffers.items()):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return f"buffer {name}"
    return ""


def drop_nonfinite(
    trials: Sequence[Sequence[Any]],
    states: Sequence[dict[str, Any]],
    first_wide: int,
    failed: dict[int, str],
    plain_trials: int,
) -> Kept:
    """Every trial, except the wide-range ones whose reference outputs (or changed buffers)
    are not finite, or whose forward raised (`failed`: trial -> why; its entries in
    `trials` and `states` are empty). The first `plain_trials` are the first distribution's."""
    kept = Kept([], [], plain=list(range(min(plain_trials, first_wide))))
    for t in range(len(trials)):
        if t < first_wide:
            kept.trial_ids.append(t)
            continue
        if t in failed:
            note = f"the reference raised on it ({failed[t]})"
        elif what := _nonfinite(trials[t], states[t]):
            note = f"the reference's {what} is not finite on it"
        else:
            kept.trial_ids.append(t)
            kept.wide.append(t)
            continue
        kept.dropped.append(t)
        kept.notes.append(f"numerics: wide-range trial {t} dropped: {note}")
    return kept


def to_double(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, list | tuple):
        return type(value)(to_double(v) for v in value)
    return value


def _rng_states(device: str) -> list[Any]:
    import torch

    states = [torch.get_rng_state()]
    if device.startswith("cuda"):
        states.append(torch.cuda.get_rng_state())
    return states


def float64_run(
    model: Any,
    inputs_of: Callable[[int], list[Any]],
    total: int,
    keep: Sequence[int],
    float32_outputs: Sequence[Sequence[Any]],
    device: str,
    float32_s: float,
    plain: Sequence[int] = (),
) -> tuple[list[list[Any]] | None, str, list[float]]:
    """(per kept trial, per output: the float64 output for a float32 output, else None;
    ""; per output, the float32 outputs' largest distance to the float64 ones over the
    `plain` trials kept: Numerics.float32_error) or (None, why there is none, zeros).
    `model` is built as the reference's; every trial runs, in order; `float32_outputs` are
    the reference's, per trial (all of them). The distances are taken on `device`, where
    the float64 outputs are (the parent took them on the CPU: ~1 s per GiB of outputs)."""
    import torch

    wanted = [t.dtype == torch.float32 for t in float32_outputs[0]]
    zeros = [0.0] * len(wanted)
    if not any(wanted):
        return None, "", zeros  # no float32 output: nothing to judge against float64
    why = "numerics: no float64 reference: "
    budget = max(FLOAT64_MIN_S, FLOAT64_BUDGET * float32_s)
    started = time.monotonic()
    exact: list[list[Any]] = []
    error = list(zeros)
    try:
        model = model.double()
        for t in range(max(keep, default=-1) + 1):  # a dropped trial still runs: state
            inputs = to_double(inputs_of(t))  # drawn (seeded) before the state is read
            before = _rng_states(device)
            with torch.no_grad():
                out = model(*inputs)
            outs = list(out) if isinstance(out, list | tuple) else [out]
            if any(not torch.equal(a, b) for a, b in zip(before, _rng_states(device), strict=True)):
                return None, why + "the forward draws random numbers (in float64, others)", zeros
            if t in keep:
                ref = float32_outputs[t]
                shapes = [tuple(o.shape) for o in outs] == [tuple(r.shape) for r in ref]
                if not shapes:
                    why += "the float64 run's outputs differ in number or shape"
                    return None, why, zeros
                exact.append([o.detach().double().cpu() if w else None
                              for o, w in zip(outs, wanted, strict=True)])  # fmt: skip
                for i, (r, o, w) in enumerate(zip(ref, outs, wanted, strict=True)):
                    if w and t in plain:  # piece by piece: no float64 copy of a whole output
                        far = largest_difference(r.to(o.device), o.detach().double())
                        error[i] = max(error[i], far)
            if time.monotonic() - started > budget:
                return None, why + f"the float64 run took over {budget:.0f} s", zeros
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        why += f"the model does not run in float64 ({type(exc).__name__}: {first})"
        return None, why, zeros
    return exact, "", error


def float64_step(model: Any, inputs: list[Any], device: str) -> tuple[list[Any], str]:
    """One trial of the float64 run in lockstep with the float32 one (a streamed reference:
    reference_child.replay): the outputs of `model` (already `.double()`) on `inputs` in float64,
    or ([], why there is none): the same reasons as `float64_run`'s. Where the accelerator
    runs out of memory (other processes hold it: a bench's jobs), the run goes on the host,
    the model with it for the trials after (H200, 19_ReLU at 4096 x 393216: the oracle's
    float64 run could not have 12 GiB while other jobs held 130 of 140 GiB)."""
    import torch

    if device != "cpu" and _on_host(model):
        device, inputs = "cpu", _to_host(inputs)
    try:
        return _float64_step(model, inputs, device)
    except Exception as exc:
        if not device_oom(exc):
            raise
        if device == "cpu":
            return [], "numerics: no float64 reference: the float64 run ran out of memory"
    torch.cuda.empty_cache()
    model.to("cpu")
    try:
        return _float64_step(model, _to_host(inputs), "cpu")
    except Exception as exc:
        if not device_oom(exc):
            raise
        return [], "numerics: no float64 reference: the float64 run ran out of memory"


def _on_host(model: Any) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def _to_host(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to("cpu")
    if isinstance(value, list | tuple):
        return type(value)(_to_host(v) for v in value)
    return value


def _float64_step(model: Any, inputs: list[Any], device: str) -> tuple[list[Any], str]:
    import torch

    why = "numerics: no float64 reference: "
    try:
        inputs = to_double(inputs)  # drawn (seeded) before the state is read
        before = _rng_states(device)
        with torch.no_grad():
            out = model(*inputs)
        outs = list(out) if isinstance(out, list | tuple) else [out]
        if any(not torch.equal(a, b) for a, b in zip(before, _rng_states(device), strict=True)):
            return [], why + "the forward draws random numbers (in float64, others)"
    except Exception as exc:
        if device_oom(exc):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return [], why + f"the model does not run in float64 ({type(exc).__name__}: {first})"
    return outs, ""
