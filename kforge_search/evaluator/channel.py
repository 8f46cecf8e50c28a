"""The worker's side of its talk with the evaluator: JSON lines on a dedicated pipe (the
candidate owns stdout), requests back on stdin. The process's name follows its stage, so a
sampler of the host's CPU tells its parts apart (procs/cpu_parts.py)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from kforge_search.procs.cpu_parts import child_name, name_self


class Channel:
    """JSON lines to the parent on a dedicated pipe (stdout is the candidate's)."""

    def __init__(self, fd: int, mode: str = ""):
        self._file = os.fdopen(fd, "w", buffering=1)
        self._mode, self._stage = mode, "start"

    def send(self, event_type: str, /, **fields: Any) -> None:
        self._file.write(json.dumps({"type": event_type, **fields}, default=str) + "\n")
        self._file.flush()
        if event_type == "compiling":  # the process's name says what its CPU does now
            name_self(child_name(self._mode, "compile" if fields.get("on") else self._stage))

    def stage(self, name: str) -> None:
        self._stage = name
        name_self(child_name(self._mode, name))
        self.send("stage", stage=name)

    def host_work(self, device: str) -> None:
        """What follows until the parent's next request is host work (a file written, the
        device's work synchronized before): on a GPU the parent lets its shared hold of the
        device go meanwhile, and holds it again before it asks anything more. A timing of
        the GPU had waited for these writes (H200, 8 actors: a timing waited 1.1 s at the
        median, 57% of the time none ran while one waited)."""
        if device.startswith("cuda"):
            self.send("aside")

    def safe_point(self, **fields: Any) -> None:
        """A pause in a long shared hold of the device (a reference between its trials, a
        baseline between its kinds): the parent lets a timing that waits go first
        (DeviceLock.yield_to_timing), then says "go". A published-size reference held the
        device for minutes (H200: 305 s) and every timing of the node waited for all of it."""
        self.send("pause", **fields)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit(0)  # the parent has gone
