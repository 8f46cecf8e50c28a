"""What the parent asks an evaluator child process to do, passed as a JSON file."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_search.problem import Problem

PROFILE_ENV = "KFORGE_PROFILE_WORKER"  # a folder: each child's cProfile stats land there


def trial_path(outputs_path: str, pos: int) -> str:
    """Where a candidate's child saves its `pos`-th verification trial (trial_check.py)."""
    return f"{outputs_path}.{pos}"


@dataclass(frozen=True)
class Job:
    mode: str  # "candidate" | "reference" | "baseline"
    problem: Problem
    platform: str
    device: str  # torch device string: "cpu" or "cuda"
    timing_method: str
    timing_meaningful: bool
    trials: int
    seed: int
    warmup: int
    timed_runs: int
    outputs_path: str
    ext_cache: str
    candidate_path: str = ""
    baseline_kinds: tuple[str, ...] = ()
    memory_limit_mb: int = 0
    writable: tuple[str, ...] = ()  # folders the candidate may write to
    second_distribution_trials: int = 2
    # the last trials: inputs of a wider range, then shifted with a zero slice (inputs.
    # EDGE_KINDS), where the reference's outputs stay finite on them (its child says which
    # it kept: Reference.trial_ids)
    wide_trials: int = 2
    # candidate and baseline modes: trials the reference dropped (a wide-range trial whose
    # reference outputs were not finite), at the problem's sizes and at its unseen sizes
    skip_trials: tuple[int, ...] = ()
    unseen_skip_trials: tuple[int, ...] = ()
    # baseline mode: the reference's outputs for the peers' check (evaluator/peers.py), and
    # the reference's at the problem's unseen sizes (`unseen`) for their check there
    reference_path: str = ""
    unseen_reference_path: str = ""
    # candidate mode: once timed, also verify at these sizes (same trials and seeds) and
    # write those outputs to unseen_outputs_path; None: no such check (baseline mode: the
    # kinds are checked there too, baseline_child.unseen_checked)
    unseen: Problem | None = None
    unseen_outputs_path: str = ""
    # candidate mode: the buffers the reference's forward changes (training mode: BatchNorm's
    # running statistics), reported after every trial beside the outputs (buffers.py)
    buffer_names: tuple[str, ...] = ()
    # candidate mode: the audit hook against introspection (pyaudit.py); off only to test the
    # defences behind it (EvalConfig.python_guards)
    python_audit: bool = True
    # reference mode: where every trial's outputs and float64 copies would take more than
    # this many bytes, the reference streams (footprint.streamed): its child keeps no trial,
    # and as the oracle recomputes one trial at a time on request; 0: never
    reference_keep_bytes: int = 0
    # candidate mode, on a CUDA device, where the oracle compares the verification trials
    # (a streamed reference's, or a held one's: EvalConfig.trials_in_oracle): their outputs
    # go to the oracle as CUDA IPC handles (shared_outputs.py), not host copies in files;
    # share_unseen: the same at the unseen sizes, whose reference may stream where the
    # first does not
    share_outputs: bool = False
    share_unseen: bool = False
    # the oracle compares the chosen timed runs, against a held reference too: their outputs
    # go to it as CUDA IPC handles on a CUDA device, else as host copies
    # (EvalConfig.timed_check_in_oracle)
    share_timed: bool = False

    @property
    def total_trials(self) -> int:
        return self.trials + self.second_distribution_trials + self.wide_trials

    @property
    def first_wide_trial(self) -> int:
        return self.trials + self.second_distribution_trials

    def kept_trials(self, unseen: bool = False) -> list[int]:
        """The trials a candidate runs: every one the reference kept."""
        skip = self.unseen_skip_trials if unseen else self.skip_trials
        return [t for t in range(self.total_trials) if t not in skip]

    def trial_seed(self, trial: int) -> int:
        return self.seed + 1 + trial

    def timing_seed(self, run: int) -> int:
        return self.seed + 100_000 + run

    def dump(self, path: Path) -> None:
        data = dataclasses.asdict(self)
        path.write_text(json.dumps(data))

    @classmethod
    def load(cls, path: str | Path) -> Job:
        data: dict[str, Any] = json.loads(Path(path).read_text())
        data["problem"] = _problem(data["problem"])
        if data.get("unseen") is not None:
            data["unseen"] = _problem(data["unseen"])
        data["baseline_kinds"] = tuple(data["baseline_kinds"])
        data["writable"] = tuple(data["writable"])
        data["buffer_names"] = tuple(data.get("buffer_names", ()))
        data["skip_trials"] = tuple(data.get("skip_trials", ()))
        data["unseen_skip_trials"] = tuple(data.get("unseen_skip_trials", ()))
        return cls(**data)


def _problem(p: dict[str, Any]) -> Problem:
    return Problem(
        id=p["id"],
        name=p["name"],
        path=p["path"],
        source=p["source"],
        constants=tuple((k, v) for k, v in p["constants"]),
        size_sets=tuple((k, tuple((a, b) for a, b in v)) for k, v in p["size_sets"]),
        size_set=p["size_set"],
        overrides=tuple((k, v) for k, v in p["overrides"]),
    )
