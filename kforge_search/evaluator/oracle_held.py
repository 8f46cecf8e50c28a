"""A held reference's verification trials, compared in its oracle (EvalConfig.trials_in_oracle).

Held, a reference's trials sat in the parent, and the parent compared a candidate's trials
itself: the candidate's child copied each trial's outputs to the host and wrote them to a
file, letting the device's hold go while it wrote; the parent took the hold back (behind
any timing that waited), read the file and copied it to the device. On an H200 (level 2,
budget 16, 8 jobs) that was 0.38 s a trial and 42% of the jobs' time: 0.17 s of it waiting
for the hold, 0.11 s the file and its copy (call 44 of docs/results/h200-2026-11-29c).

Here, on a CUDA device, it goes as against a streamed reference (oracle_compare.py): the
child leaves its outputs where they are and hands their CUDA IPC handles (shared_outputs.py),
keeping the hold; the parent hands the file of handles to the oracle, which opens them and
compares on the device against the reference's trials, which it keeps there. It reads them
once, from a file the parent writes into its folder (Oracle.hold_trials), and removes it.
The parent opens no device memory of a candidate; the oracle never loads a candidate. The
child runs its next trial while the oracle compares (the parent says `ahead`; the child keeps
the shared outputs until the next trial's command), except after its last.

Measured on one H200 (docs/results/h200-2026-11-29d), it did not pay, so it is off unless
asked for (EvalConfig.trials_in_oracle): at budget 16 (level 2, shard 0/3, 8 jobs, one
machine, one run each) the candidates' time went 1531 -> 1476 s and their trials' waits for
the hold 355 -> 275 s, but an oracle now had to start wherever a candidate was verified with
none alive (the unseen sizes', a lent evaluator's: 22 -> 35 starts, each taking a spare) and
be sent the trials (the first trials' comparisons: 39.7 -> 93.4 s), and the bench's wall
went 287 -> 300 s. In `bench --throughput`, where every evaluator meets every problem
(without `ahead`): 61.9 -> 55.9 evaluations a GPU-minute, 31 first trials that started an
oracle took 3.6 s each at the median.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kforge_search.evaluator import tensorfile
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.oracle_compare import TrialSpec, one_trial
from kforge_search.evaluator.out_of_memory import device_oom
from kforge_search.evaluator.policy import get_policy
from kforge_search.evaluator.resident import KEEP, Trials, device_budget
from kforge_search.evaluator.verify import moved_to

HELD_FILE = "held-trials"  # the name of the parent's file in the oracle's folder


@dataclass
class HeldRoom:
    """What one evaluator's oracles keep of held references' trials on its device: a
    reference's at most `budget` (resident.device_budget), KEEP references' worth in all: a
    problem's and its unseen sizes' always stay, or the two would close each other's oracle
    for every candidate."""

    budget: int = 0  # set from the device when first asked

    def fits(self, size: int, device: str) -> bool:
        """Whether a held reference's trials of `size` bytes go to its oracle."""
        if not self.budget:
            self.budget = device_budget(device)
        return size <= self.budget

    def to_close(self, holding: list[Any], asked: Any) -> list[Any]:
        """Of the oracles keeping trials (`holding`, the least recently asked first), those
        to close, never `asked`: one closed starts again when asked, and is sent them again."""
        closing, kept = [], sum(o.held_bytes for o in holding)
        for oracle in holding:
            if kept <= KEEP * self.budget or oracle is asked:
                break
            closing.append(oracle)
            kept -= oracle.held_bytes
        return closing


@dataclass(frozen=True)
class HeldTrials:
    """A held reference's trials as the oracle keeps them: outputs, float64 rows (or None)
    and changed buffers per compared trial, on `device` (None: the host)."""

    outputs: list[list[Any]]
    exact: list[list[Any]] | None
    buffers: list[dict[str, Any]]
    device: str | None

    @staticmethod
    def saved(trials: Trials) -> dict[str, Any]:
        """What the parent writes for the oracle (tensorfile.write), read by `read`."""
        return {"outputs": list(trials.outputs), "exact": trials.exact,
                "buffers": list(trials.buffers)}  # fmt: skip

    @classmethod
    def read(cls, path: str, device: str | None) -> HeldTrials:
        """The trials in the parent's file at `path` (removed once read), on `device` where
        they fit there, else on the host."""
        import torch

        file = Path(path)
        try:
            saved = tensorfile.load(file)
        finally:
            file.unlink(missing_ok=True)
        if device is not None:
            try:
                saved = moved_to(saved, device)
            except Exception as exc:
                if not device_oom(exc):
                    raise
                torch.cuda.empty_cache()
                device = None
        return cls(saved["outputs"], saved["exact"], saved["buffers"], device)


def serve_held_trials(
    job_device: str, channel: Channel, spec: TrialSpec, kept: dict[str, HeldTrials]
) -> None:
    """A candidate's verification trials against the held reference's (`spec.held`: read
    once, then kept in `kept`): per compared trial the parent says `trial PATH` (the
    candidate's file, moved into this folder), and the verdict goes back (`compared`);
    anything else ends the stream; then `trials-done`."""
    trials = kept.get(spec.held)  # by the path the parent named them with
    if trials is None:
        device = job_device if job_device.startswith("cuda") else None
        kept.clear()  # an oracle serves one reference: an older file's trials go
        trials = kept[spec.held] = HeldTrials.read(spec.held, device)
        if trials.device is None and device is not None:
            channel.send("on-host", why="no room on the device for the held trials")
    policy = get_policy(spec.policy)
    for pos, trial in enumerate(spec.ids):
        command = sys.stdin.readline().split()
        if command[:1] != ["trial"] or len(command) != 2:
            break
        if pos >= len(trials.outputs):
            channel.send("compared", error=f"trial {trial}: the reference has no such trial")
            break
        row = trials.exact[pos] if trials.exact is not None else None
        buffers = [trials.buffers[pos]] if pos < len(trials.buffers) else None
        found = one_trial(trials.outputs[pos], row, buffers, Path(command[1]), policy, trial,
                          spec.wide, spec.plain, spec.scales[pos], trials.device,
                          shared=True)  # fmt: skip
        channel.send("compared", comparison=asdict(found))
    channel.send("trials-done")
