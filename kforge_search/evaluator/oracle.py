"""The oracle: the reference's outputs for a candidate's timed runs, from a process that
never loads a candidate (the reference's own child, kept after it computed the reference,
or a fresh one where that child has gone).

A candidate's timed runs draw their inputs from fresh OS randomness sent only after it is
loaded and verified, so no reference output for them can exist before; the parent asks the
oracle for the runs it chose to check after they ran (pipeline.py, timed_runs.py). Against a
streamed reference the oracle itself compares: a candidate's verification trials and its
chosen timed runs (oracle_compare.py); against a held one too, on a CUDA device (its trials
sent once and kept there: oracle_held.py), and the chosen timed runs wherever
EvalConfig.timed_check_in_oracle.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import tensorfile
from kforge_search.evaluator.oracle_compare import RunSpec, TrialSpec, comparison_of, handed, load
from kforge_search.evaluator.oracle_held import HELD_FILE, HeldTrials
from kforge_search.evaluator.resident import Trials
from kforge_search.evaluator.sandbox import Child
from kforge_search.evaluator.verify import Comparison


class OracleError(Exception):
    """The oracle could not answer (its process ended): an infrastructure failure; `busy`:
    it ran out of device memory that other processes held (worker.busy_reasons)."""

    def __init__(self, message: str, busy: bool = False):
        super().__init__(message)
        self.busy = busy


@dataclass
class Oracle:
    child: Child
    work: Path  # the child's folder (its job file, its answers): goes with it
    _handed: int = field(default=0, init=False)  # candidate files handed to it
    # a held reference's trials sent to it (hold_trials): their file's path, and bytes
    held: str = field(default="", init=False)
    held_bytes: int = field(default=0, init=False)
    # the request's work went to the host while other processes held the device (its
    # `on-host` events): an end past its limit is then the device's state (OracleError.busy)
    crowded: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        weakref.finalize(self, Oracle._end, self.child, self.work)

    @staticmethod
    def _end(child: Child, work: Path) -> None:
        with contextlib.suppress(Exception):
            child.send("stop")
            child.kill("")
        shutil.rmtree(work, ignore_errors=True)

    @property
    def alive(self) -> bool:
        return self.child.running()

    def pid(self) -> int:
        return self.child.pid

    def outputs(
        self, draw: int, runs: list[int], aside: Callable[[], object] = bool
    ) -> list[list[Any]]:
        """Per run in `runs`, the reference's outputs on that timed run's inputs. `aside`:
        called when the oracle's device work is done and it writes them (host work: its
        caller may let the device lock go, Channel.host_work)."""
        if not self.alive:
            raise OracleError("the oracle's process has ended")
        self.crowded = False  # said anew for each request
        self.child.ask(f"runs {draw} {' '.join(str(r) for r in runs)}")
        return load(Path(self._answer("oracle", aside)["path"]))

    def compare_trials(self, spec: TrialSpec) -> None:
        """Starts comparing a candidate's verification trials against a streamed reference
        (oracle_compare.py): compare_trial for each in turn, then end_trials."""
        if not self.alive:
            raise OracleError("the oracle's process has ended")
        self.child.ask(f"compare-trials {json.dumps(asdict(spec))}")
        self._handed, self.crowded = 0, False

    def hold_trials(self, trials: Trials, size: int) -> str:
        """The path that names a held reference's trials (`size` bytes) to this oracle:
        written into its folder the first time, read and kept by the oracle at its first
        comparison (oracle_held.py)."""
        if not self.held:
            path = self.work / HELD_FILE
            tensorfile.write(HeldTrials.saved(trials), path)
            self.held, self.held_bytes = str(path), size
        return self.held

    def compare_trial(self, path: Path) -> Comparison:
        """The next compared trial: the candidate's file at `path` (moved to the oracle)
        against the reference's trial, recomputed only now."""
        self._handed += 1
        moved = handed(path, self.work, f"candidate-trial-{self._handed}")
        self.child.ask(f"trial {moved}")
        event = self._answer("compared")
        if "comparison" not in event:
            moved.unlink(missing_ok=True)
            raise OracleError(f"the oracle could not recompute {event.get('error')}")
        return comparison_of(event["comparison"])

    def end_trials(self) -> None:
        """Ends the stream (the oracle then waits for its next request)."""
        self.child.ask("end")
        while (event := self.child.next_event()) is not None:
            if event["type"] in ("trials-done", "fail"):
                return

    def compare_runs(self, spec: RunSpec) -> str:
        """A candidate's chosen timed runs (their file at spec.path, moved to the oracle)
        against the reference's on the same inputs: "" when they match, else what differs."""
        moved = handed(Path(spec.path), self.work, "candidate-runs")
        self.crowded = False
        self.child.ask(f"compare-runs {json.dumps(asdict(replace(spec, path=str(moved))))}")
        return str(self._answer("compared-runs")["difference"])

    def _answer(self, kind: str, aside: Callable[[], object] = bool) -> dict[str, Any]:
        why, busy = "", False
        while (event := self.child.next_event()) is not None:
            if event["type"] == kind:
                return event
            if event["type"] == "aside":
                aside()
                continue
            if event["type"] == "on-host":
                self.crowded = self.crowded or bool(event.get("crowded"))
                continue
            if event["type"] in ("fail", "trials-done"):
                why = str(event.get("message", "")) or f"it ended its answers ({event['type']})"
                busy = bool(event.get("busy"))
                break
        exit = self.child.exit
        if exit is not None and not why:
            how = f"killed ({exit.killed})" if exit.killed else f"exit {exit.returncode}"
            how += f", {exit.signal_name}" if exit.signal_name else ""
            why = (
                f"its process ended in stage {exit.stage!r}: {how}, peak {exit.peak_rss_mb:.0f} MB"
            )
        tail = exit.output[-1500:] if exit else ""
        # past a limit on the host: ours, or the system's (a SIGKILL this process did not
        # send: the kernel's OOM killer). The oracle never loads a candidate, so neither is
        # a draft's doing (H200, level 1 loose with 2 jobs: 38_L1Norm_'s seed spent 213 s in
        # verify and its oracle died of SIGKILL at 25.5 GB, INFRA_ERROR; whether its work had
        # gone to the host was not recorded; alone on the device the problem ran OK)
        if self.crowded and exit is not None and (exit.killed or exit.signal_name == "SIGKILL"):
            busy, why = True, f"{why} (its work went to the host: others held the device)"
        raise OracleError(
            f"the oracle could not answer: {why or 'its process ended'} {tail}", busy=busy
        )

    def close(self) -> None:
        Oracle._end(self.child, self.work)
