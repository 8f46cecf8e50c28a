"""Where an evaluation's wall clock went: seconds per phase, in the order first seen.

The candidate child's phases are its announced stages (start: the interpreter and the
worker's imports; setup: torch, the device and the problem; build, verify, time, profile);
the evaluator adds its own around them (static_check, reference, unseen, baselines, ncu).
A search reads them to tell a slow kernel from a slow harness.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Phases = tuple[tuple[str, float], ...]


class PhaseClock:
    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self._seconds[name] = self._seconds.get(name, 0.0) + max(seconds, 0.0)

    def extend(self, phases: Iterable[tuple[str, float]]) -> None:
        for name, seconds in phases:
            self.add(name, seconds)

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def phases(self) -> Phases:
        """Rounded to the millisecond; phases that took no measurable time are left out."""
        return tuple((n, round(s, 3)) for n, s in self._seconds.items() if s >= 0.0005)


def marks_to_phases(marks: list[tuple[str, float]], end: float) -> Phases:
    """(stage, monotonic start) marks of one child and its end -> seconds per stage."""
    clock = PhaseClock()
    for (name, start), (_, stop) in zip(marks, [*marks[1:], ("", end)], strict=True):
        clock.add(name, stop - start)
    return clock.phases()


def profiled(mode: Callable[[Any, Any], None], job: Any, channel: Any, folder: str) -> None:
    """A worker's mode (run with job and channel) under cProfile, its stats written to
    `folder` ($KFORGE_PROFILE_WORKER; scripts/eval_phases.py reads them): where the time
    goes inside a child."""
    import cProfile

    path = os.path.join(folder, f"{job.mode}-{os.getpid()}.prof")
    prof = cProfile.Profile()
    send = channel.send

    def dump_then_send(event_type: str, /, **fields: Any) -> None:
        if event_type == "burst":  # its wall clock is the parent's (timed_check.py): no dump
            send(event_type, **fields)  # inside it (the next event's dump comes first)
            return
        prof.disable()  # the parent may kill this process at any event: stats first
        try:  # whole files only: a kill mid-write leaves the previous one
            prof.dump_stats(f"{path}.tmp")
            os.replace(f"{path}.tmp", path)
        except Exception as exc:
            print(f"kforge: profile not written: {exc!r}", file=sys.stderr, flush=True)
        prof.enable()
        send(event_type, **fields)

    channel.send = dump_then_send  # type: ignore[method-assign]
    prof.enable()
    try:
        mode(job, channel)
    finally:
        prof.disable()
