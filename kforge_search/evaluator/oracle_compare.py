"""A streamed reference's comparisons, made in its oracle (footprint.streamed: its trials'
outputs do not all fit in the parent).

The parent hands the oracle the file a candidate's child saved (a verification trial's
outputs and changed buffers, or the chosen timed runs' outputs); the oracle recomputes the
reference's side only then, compares where its outputs are (the accelerator, where there is
room) and answers with the verdict alone. Before, the oracle wrote each trial's outputs and
their float64 copies to a file for the parent: 18 GiB a trial for a 4096 x 393216 level-1
problem, and the first evaluation of one did not finish in 300 s (H200).

The oracle never loads a candidate: it reads the candidate's saved tensors only
(torch.load with weights_only), as the parent did.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_search.evaluator import shared_outputs
from kforge_search.evaluator.out_of_memory import device_oom
from kforge_search.evaluator.policy import NumericPolicy, get_policy
from kforge_search.evaluator.result import Correctness, Mismatch
from kforge_search.evaluator.verify import Comparison, compare_outputs, compare_timed, placed

# the oracle's comparisons run on its accelerator where it has room for this many times one
# trial's outputs: the trial's float32 inputs and outputs, the float64 run's inputs and outputs
# (twice the size each: an elementwise problem's inputs are the size of its outputs), the
# candidate's outputs, a comparison's piece
DEVICE_OUTPUT_COPIES = 8


def load(path: Path) -> Any:
    """A file a child saved, read and removed."""
    import torch

    try:
        return torch.load(path, weights_only=True)
    finally:
        path.unlink(missing_ok=True)


def handed(path: Path, folder: Path, name: str) -> Path:
    """A candidate's file moved into the oracle's folder (the oracle reads only its own)."""
    target = folder / name
    try:
        os.replace(path, target)
    except OSError:  # another file system
        shutil.move(path, target)
    return target


@dataclass(frozen=True)
class TrialSpec:
    """What the oracle needs to compare a candidate's verification trials (as
    verify.compare_outputs takes them): the compared trials' numbers, the wide-range ones,
    the first distribution's, atol's factors per compared trial and output, and where a
    held reference's trials are."""

    policy: str
    float64: bool
    ids: list[int]
    wide: list[int]
    plain: list[int] | None
    scales: list[list[float]]
    output_bytes: int
    # a held reference's: its trials' file in the oracle's folder, read once and kept
    # there (oracle_held.py); "": a streamed reference, whose trials the oracle recomputes
    held: str = ""


@dataclass(frozen=True)
class RunSpec:
    """What the oracle needs to check a candidate's chosen timed runs and burst calls
    (candidate_drive.py): the timed runs' draw, the runs and calls (their outputs, in that
    order, in `path`), the policy, the reference's own rounding per output
    (verify.compare_timed) and the burst's draw (its calls' inputs)."""

    policy: str
    draw: int
    runs: list[int]
    calls: list[int]
    path: str
    slack: list[float]
    burst_draw: int

    def inputs(self) -> list[tuple[int, int]]:
        """(draw, index) of each checked output's inputs, in the file's order."""
        return [(self.draw, r) for r in self.runs] + [(self.burst_draw, c) for c in self.calls]


def compare_device(device: str, output_bytes: int) -> str | None:
    """Where the oracle compares: `device` where it has room, else the CPU (None)."""
    if not device.startswith("cuda"):
        return None
    import torch

    free, _ = torch.cuda.mem_get_info()  # the oracle caches nothing between requests: let_go
    return device if free > DEVICE_OUTPUT_COPIES * output_bytes else None


def compare_trial(
    spec: TrialSpec,
    pos: int,
    expected: list[Any],
    row: list[Any] | None,
    changed: dict[str, Any],
    path: Path,
    device: str | None,
) -> Comparison:
    """Compared trial `pos`: the reference's outputs (`row`: their float64 copies, or None)
    and changed buffers against the candidate's (its file at `path`, read and removed)."""
    return one_trial(expected, row, [changed], path, get_policy(spec.policy), spec.ids[pos],
                     spec.wide, spec.plain, spec.scales[pos], device, shared=True)  # fmt: skip


def one_trial(
    expected: Sequence[Any],
    row: Sequence[Any] | None,
    buffers: list[dict[str, Any]] | None,
    path: Path,
    policy: NumericPolicy,
    trial: int,
    wide: Sequence[int],
    plain: Sequence[int] | None,
    scales: Sequence[float],
    device: str | None,
    shared: bool = False,
    spent: dict[str, float] | None = None,
) -> Comparison:
    """One verification trial of a candidate (its file at `path`, read and removed) against
    the reference's outputs, float64 row and changed buffers (verify.compare_outputs), on
    `device` where they fit (verify.placed): the parent's for a held reference
    (trial_check.py), the oracle's for a streamed one (`shared`: its outputs may come as
    CUDA IPC handles, shared_outputs.py, opened here). `spent`, where given, gets each
    part's seconds: "read", "placed" and "compared" (the event journal's `compared` lines)."""
    began = time.perf_counter()
    theirs = load(path)
    outputs = candidate_outputs(theirs["outputs"], shared)
    read = time.perf_counter()
    mine = (list(expected), row, buffers, outputs, theirs["buffers"])
    expected, row, buffers, outputs, changed = placed(mine, device)
    moved = time.perf_counter()
    found = compare_outputs(
        [list(expected)],
        [outputs],
        policy,
        buffers,
        [changed],
        exact=[list(row)] if row is not None else None,
        trial_ids=[trial],
        wide=wide,
        plain=plain,
        scales=[scales],
    )
    if spent is not None:
        spent.update(read=read - began, placed=moved - read, compared=time.perf_counter() - moved)
    return found


def candidate_outputs(outputs: Any, shared: bool) -> Any:
    """A candidate's saved outputs, its shared ones opened where `shared` (the oracle: on
    its device, the candidate's); elsewhere a shared entry is refused: the parent opens no
    device memory."""
    if not isinstance(outputs, list) or not shared_outputs.has_shared(outputs):
        return outputs
    if not shared:
        raise ValueError("the candidate's outputs came as device handles to the parent")
    return shared_outputs.opened(outputs)


def labels(runs: list[int], calls: list[int]) -> list[str]:
    """How a check of the timed runs names each chosen run and burst call, in that order."""
    return [f"timed run {r}" for r in runs] + [f"back-to-back call {c}" for c in calls]


def compare_run(
    spec: RunSpec, label: str, expected: list[Any], actual: list[Any], device: str | None
) -> str:
    """One timed run's or burst call's outputs against the reference's ("" when they match),
    on `device` where its memory holds the comparison's pieces, else on the host."""
    import torch

    policy = get_policy(spec.policy)
    try:
        return _compared_run(policy, spec.slack, label, expected, actual, device)
    except Exception as exc:  # the pieces' temporaries: the device is full
        if not device_oom(exc):
            raise
        torch.cuda.empty_cache()
    return _compared_run(policy, spec.slack, label, expected, actual, "cpu")


def _compared_run(
    policy: NumericPolicy,
    slack: list[float],
    label: str,
    expected: list[Any],
    actual: list[Any],
    device: str | None,
) -> str:
    import torch

    if device == "cpu":
        expected, actual = ([t.cpu() if isinstance(t, torch.Tensor) else t for t in ts]
                            for ts in (expected, actual))  # fmt: skip
    else:
        expected, actual = placed((expected, actual), device)
    return compare_timed([expected], [actual], [label], policy, slack)


def comparison_of(fields: dict[str, Any]) -> Comparison:
    """A Comparison from the oracle's answer (dataclasses.asdict of one, through JSON)."""
    mismatch = fields.get("mismatch")
    if mismatch is not None:
        indices = tuple(tuple(int(i) for i in ix) for ix in mismatch.get("indices", ()))
        mismatch = Mismatch(**{**mismatch, "indices": indices})
    return Comparison(Correctness(**fields["correctness"]), mismatch)
