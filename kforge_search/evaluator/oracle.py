"""The oracle: the reference's outputs for a candidate's timed runs, from a process that
never loads a candidate (the reference's own child, kept after it computed the reference,
or a fresh one where that child has gone).

A candidate's timed runs draw their inputs from fresh OS randomness sent only after it is
loaded and verified, so no reference output for them can exist before; the parent asks the
oracle for the runs it chose to check after they ran (pipeline.py, timed_runs.py).
"""

from __future__ import annotations

import contextlib
import shutil
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_search.evaluator.sandbox import Child


class OracleError(Exception):
    """The oracle could not answer (its process ended): an infrastructure failure."""


@dataclass
class Oracle:
    child: Child
    work: Path  # the child's folder (its job file, its answers): goes with it

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

    def outputs(self, draw: int, runs: list[int]) -> list[list[Any]]:
        """Per run in `runs`, the reference's outputs on that timed run's inputs."""
        import torch

        if not self.alive:
            raise OracleError("the oracle's process has ended")
        self.child.ask(f"runs {draw} {' '.join(str(r) for r in runs)}")
        while (event := self.child.next_event()) is not None:
            if event["type"] == "oracle":
                path = Path(event["path"])
                try:
                    return torch.load(path, weights_only=True)
                finally:
                    path.unlink(missing_ok=True)
            if event["type"] == "fail":
                break
        exit = self.child.exit
        raise OracleError(f"the oracle's process ended: {exit.output[-1500:] if exit else ''}")

    def trials(self, float64: bool, ids: list[int]) -> dict[str, Any]:
        """A streamed reference's verification trials `ids`, recomputed in order: the first
        one's {"outputs", "exact"} (exact: per output, float64 or None; None without
        `float64`); next_trial gives each next one, end_trials ends the stream."""
        if not self.alive:
            raise OracleError("the oracle's process has ended")
        self.child.ask(f"trials {int(float64)} {' '.join(str(t) for t in ids)}")
        return self._trial()

    def next_trial(self) -> dict[str, Any]:
        self.child.ask("next")
        return self._trial()

    def end_trials(self) -> None:
        """Ends the stream (the oracle then waits for its next request)."""
        self.child.ask("end")
        while (event := self.child.next_event()) is not None:
            if event["type"] in ("trials-done", "fail"):
                return

    def _trial(self) -> dict[str, Any]:
        import torch

        while (event := self.child.next_event()) is not None:
            if event["type"] == "trial":
                if not event.get("path"):
                    raise OracleError(f"the oracle could not recompute {event.get('error')}")
                path = Path(event["path"])
                try:
                    return torch.load(path, weights_only=True)
                finally:
                    path.unlink(missing_ok=True)
            if event["type"] in ("fail", "trials-done"):
                break
        exit = self.child.exit
        raise OracleError(f"the oracle's process ended: {exit.output[-1500:] if exit else ''}")

    def close(self) -> None:
        Oracle._end(self.child, self.work)
