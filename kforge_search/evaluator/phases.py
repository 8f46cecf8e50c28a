"""Where an evaluation's wall clock went: seconds per phase, in the order first seen.

The candidate child's phases are its announced stages (start: the interpreter and the
worker's imports; setup: torch, the device and the problem; build, verify, time, profile);
the evaluator adds its own around them (static_check, reference, unseen, baselines, ncu).
A search reads them to tell a slow kernel from a slow harness.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator

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
