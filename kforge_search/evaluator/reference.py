"""A problem's reference as the evaluator holds it: its outputs per verification trial
(or, streamed, what of them the parent keeps), their float64 copies and numerics, the
buffers its forward changed, its footprint; read from its child's event and files."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_search.evaluator import footprint, tensorfile
from kforge_search.evaluator.exact import Numerics
from kforge_search.evaluator.footprint import Footprint
from kforge_search.evaluator.oracle import Oracle
from kforge_search.evaluator.policy import NumericPolicy
from kforge_search.evaluator.resident import Resident, Trials
from kforge_search.evaluator.sandbox import Child
from kforge_search.evaluator.trial_check import TrialCheck
from kforge_search.evaluator.verify import atol_scales, scales_of
from kforge_search.problem import Problem


@dataclass(frozen=True)
class Streamed:
    """What the parent keeps of a streamed reference's outputs (worker.
    streamed_reference_trials): its trials themselves its oracle recomputes."""

    float64: bool  # the oracle's trials come with float64 outputs
    dtypes: list[str]
    output_bytes: int  # one trial's


@dataclass(frozen=True)
class Reference:
    outputs: list[list[Any]]  # per compared trial (empty where `streamed`)
    warnings: tuple[str, ...]
    device_name: str
    torch_version: str
    per_call_ms: float = 0.0  # a call's wall clock: its inputs, the call, a copy (limits.py)
    # per trial, the buffers its forward changed (training mode: BatchNorm's running stats)
    buffers: list[dict[str, Any]] = field(default_factory=list)
    numerics: Numerics = field(default_factory=Numerics)  # trials kept, float64 outputs
    footprint: Footprint | None = None  # one call's, as its child measured it (footprint.py)
    streamed: Streamed | None = None  # not held: recomputed by the oracle (trial_check.py)
    # seconds by part where it was computed (its child's start, setup, float32 trials,
    # float64, ..., the parent's read); empty where it was read from the reference store
    spent: tuple[tuple[str, float], ...] = ()

    @property
    def dtypes(self) -> list[str]:
        if self.streamed is not None:
            return list(self.streamed.dtypes)
        return [str(t.dtype).removeprefix("torch.") for t in self.outputs[0]]

    @property
    def output_bytes(self) -> int:
        """One trial's outputs, in bytes."""
        if self.streamed is not None:
            return self.streamed.output_bytes
        return sum(t.numel() * t.element_size() for t in self.outputs[0]) if self.outputs else 0

    @functools.cached_property
    def scales(self) -> list[list[float]]:
        """atol's factors per compared trial and output (verify.atol_scales): from the
        outputs' sizes its child measured (Numerics.magnitudes), else once per reference,
        not per candidate (a pass over every trial's outputs in float64)."""
        n = self.numerics
        ids = list(n.trial_ids or range(len(self.outputs)))
        if n.magnitudes:
            return scales_of(n.magnitudes, ids, n.wide, n.plain or None)
        return atol_scales(self.outputs, ids, n.wide, n.plain or None)

    def check(
        self,
        policy: NumericPolicy,
        oracle: Callable[[], Oracle],
        device: str | None = None,
        resident: Resident | None = None,
        in_oracle: bool = False,
    ) -> TrialCheck:
        """A verification against this reference, trial by trial (trial_check.py); `oracle`
        recomputes a streamed reference's trials (`in_oracle`: keeps a held one's and
        compares them, oracle_held.py); `device`: where the comparisons run; `resident`:
        where a held reference's trials stay on that device between candidates."""
        n = self.numerics
        ids = list(n.trial_ids or range(len(self.outputs)))
        plain = n.plain or None
        trials = Trials(self.outputs, n.exact, self.buffers)
        if self.streamed is None and in_oracle:
            return TrialCheck([], None, self.buffers, ids, n.wide, plain, self.scales, policy,
                              oracle, device=device, output_bytes=self.output_bytes,
                              held=trials, held_bytes=self.held_bytes)  # fmt: skip
        if self.streamed is None:
            if resident is not None and device is not None:
                trials = resident.trials(self, trials, self.held_bytes)
            return TrialCheck(trials.outputs, trials.exact, trials.buffers, ids, n.wide, plain,
                              self.scales, policy, device=device)  # fmt: skip
        return TrialCheck([], None, self.buffers, ids, n.wide, plain, self.scales, policy,
                          oracle, self.streamed.float64, device=device,
                          output_bytes=self.output_bytes)  # fmt: skip

    @property
    def buffer_names(self) -> tuple[str, ...]:
        """Every buffer some trial's forward changed: a candidate reports these."""
        return tuple(sorted({name for trial in self.buffers for name in trial}))

    @property
    def held_bytes(self) -> int:
        """What this reference holds in memory: every trial's outputs, their float64 copies,
        the buffers its forward changed."""
        tensors = [t for trial in self.outputs for t in trial]
        tensors += [t for trial in self.numerics.exact or [] for t in trial if t is not None]
        tensors += [t for trial in self.buffers for t in trial.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


def reference_of(
    event: dict[str, Any],
    outputs_path: str,
    info: dict[str, Any],
    measured: Footprint | None,
    hashed: bool = False,
    started: float | None = None,
) -> tuple[Reference, tensorfile.Read]:
    """The reference its child's "reference" event and file describe, and that file as read
    (`hashed`: with its SHA-256, for the reference store): its tensors are views of it.
    `started`: when (time.monotonic) its child was asked for, for `spent`'s "start"."""
    read_at = time.monotonic()
    read = tensorfile.read(Path(outputs_path), hashed)
    parts = [(str(name), float(s)) for name, s in event.get("spent", [])]
    if started is not None:  # what the child's own parts do not cover: its start
        parts.insert(0, ("start, waits", max(0.0, read_at - started - sum(s for _, s in parts))))
    parts.append(("read", time.monotonic() - read_at))
    saved = tensorfile.parse(read.data)
    common = {
        "warnings": tuple(event["warnings"]),
        "device_name": info.get("device_name", ""),
        "torch_version": info.get("torch_version", ""),
        "per_call_ms": float(event.get("per_call_ms", 0.0)),
        "buffers": saved["buffers"],
        "footprint": measured,
        "spent": tuple((name, round(s, 3)) for name, s in parts),
    }
    numerics = Numerics.from_event(event, saved.get("exact"))
    if (streamed := event.get("streamed")) is None:
        return Reference(outputs=saved["outputs"], numerics=numerics, **common), read
    kept = Streamed(bool(streamed["float64"]), streamed["dtypes"], int(streamed["output_bytes"]))
    return Reference(outputs=[], numerics=numerics, streamed=kept, **common), read


def memory_note(child: Child, measured: Footprint | None, problem: Problem) -> str:
    """What a reference's child killed for its memory had, needed and may do about it."""
    assert child.exit is not None
    if child.exit.killed != "memory":
        return ""
    held = f"; {measured.describe()}" if measured is not None else ""
    return (
        f": it reached {child.exit.peak_rss_mb:.0f} MiB, its limit {child.limits.memory_mb} MiB"
        f"{held}; {footprint.sizes_hint(problem)}"
    )
