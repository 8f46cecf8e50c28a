"""A warm spare child: a worker that has started Python, imported torch and triton and,
on CUDA, created its context, and now waits on stdin for a job.

A candidate still gets a process that no candidate ran in before; it only skips the
start-up (cpu-cpp at CI sizes on a 2-CPU machine: 1.7 -> 1.4 s per warm evaluation;
cpu-triton 2.0 -> 1.65 s). The next spare warms up
while a candidate child builds and verifies; what of its warm-up touches the device (on a
GPU its CUDA context, on the CPU all of it) holds the device lock shared (standby.py), so it
never runs beside timed runs, and no evaluator waits for its own spare before timing. Reference and
baseline children (which time the reference on their own) get their next spare only once
they have ended. One spare per evaluator, for the environment it used last.
"""

from __future__ import annotations

import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path

from kforge_search.evaluator.sandbox import Spawned, child_env, spawn


def _key(device: str, env: Mapping[str, str]) -> tuple[str, ...]:
    return (device, *sorted(f"{k}={v}" for k, v in child_env(env).items()))


class Spares:
    def __init__(self) -> None:
        self._spare: tuple[tuple[str, ...], Spawned] | None = None
        # an evaluator dropped without close(): its spare ends with it, not with this process
        # (a Popen collected while its process runs is kept alive by subprocess itself)
        weakref.finalize(self, Spares._end, self.__dict__)

    @staticmethod
    def _end(state: dict) -> None:
        spare, state["_spare"] = state.get("_spare"), None
        if spare is not None:
            spare[1].kill()

    def take(self, device: str, env: Mapping[str, str]) -> Spawned | None:
        """The spare, when it was started for this device and environment (else it goes)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare[0] == _key(device, env) and spare[1].proc.poll() is None:
            return spare[1]
        spare[1].kill()
        return None

    def prepare(self, device: str, env: Mapping[str, str]) -> None:
        if self._spare is not None:
            return
        proc = spawn(["--standby", device], Path(tempfile.gettempdir()), env)
        self._spare = (_key(device, env), proc)

    def pids(self) -> list[int]:
        return [self._spare[1].proc.pid] if self._spare is not None else []

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare[1].kill()
