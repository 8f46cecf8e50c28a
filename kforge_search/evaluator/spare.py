"""A warm spare child: a worker that has started Python, imported torch and triton and,
on CUDA, created its context, and now waits on stdin for a job.

A candidate still gets a process that no candidate ran in before; it only skips the
start-up (cpu-cpp at CI sizes on a 2-CPU machine: 1.7 -> 1.4 s per warm evaluation;
cpu-triton 2.0 -> 1.65 s). On a GPU the next spare warms up while a candidate child builds
and verifies; on the CPU once the candidate's child has ended (pipeline._child). What of its
warm-up touches the device (on a GPU its CUDA context, on the CPU all of it) holds the device
lock shared (standby.py), so it never runs beside timed runs; an evaluator waits for its
spare's "ready" holding nothing. Reference and
baseline children (which time the reference on their own) get their next spare only once
they have ended. One spare per evaluator, for the environment it used last.

Where a zygote serves (zygote.py; by default), a spare is forked from it, warm
already: its start-up costs ~40 ms instead of the imports (3.2 CPU-s on a 2-CPU machine).
"""

from __future__ import annotations

import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path

from kforge_search.evaluator.sandbox import Spawned, child_env, spawn
from kforge_search.evaluator.zygote import Zygote

ZYGOTE_AFTER = 3  # spares of one environment before its zygote starts


def _key(device: str, env: Mapping[str, str]) -> tuple[str, ...]:
    return (device, *sorted(f"{k}={v}" for k, v in child_env(env).items()))


class Spares:
    """`zygote`: spares forked from a warm zygote per environment (zygote.py)."""

    def __init__(self, zygote: bool = True) -> None:
        # the evaluator's threads (a candidate's child beside its baselines ahead:
        # pipeline.py) take and prepare the one spare, and ask the zygote, in turns
        self._turns = threading.RLock()
        self._spare: tuple[tuple[str, ...], Spawned] | None = None
        self._zygote = zygote
        self._zygotes: dict[tuple[str, ...], Zygote] = {}  # kept until close: each one's
        # children end with it
        self._asked: dict[tuple[str, ...], int] = {}  # spares asked for, per environment
        # an evaluator dropped without close(): its spare ends with it, not with this process
        # (a Popen collected while its process runs is kept alive by subprocess itself)
        weakref.finalize(self, Spares._end, self.__dict__)

    @staticmethod
    def _end(state: dict) -> None:
        spare, state["_spare"] = state.get("_spare"), None
        if spare is not None:
            spare[1].kill()
        zygotes, state["_zygotes"] = state.get("_zygotes", {}), {}
        for zygote in zygotes.values():
            zygote.close()

    def take(self, device: str, env: Mapping[str, str]) -> Spawned | None:
        """The spare, when it was started for this device and environment (else it goes)."""
        with self._turns:
            spare, self._spare = self._spare, None
        if spare is None:
            return None
        if spare[0] == _key(device, env) and spare[1].proc.poll() is None:
            return spare[1]
        spare[1].kill()
        return None

    def prepare(self, device: str, env: Mapping[str, str]) -> None:
        with self._turns:
            if self._spare is not None:
                return
            key = _key(device, env)
            forked = self._forked(key, device, env)
            proc = forked or spawn(["--standby", device], Path(tempfile.gettempdir()), env)
            self._spare = (key, proc)

    def _forked(self, key: tuple[str, ...], device: str, env: Mapping[str, str]) -> Spawned | None:
        """A spare from this environment's zygote, started at its ZYGOTE_AFTER-th spare (an
        evaluator that runs a job or two pays for no zygote); until it is warm, and for good
        when it said its forks are unfit, spares start as their own interpreters."""
        if not self._zygote:
            return None
        self._asked[key] = self._asked.get(key, 0) + 1
        zygote = self._zygotes.get(key)
        if zygote is None and self._asked[key] < ZYGOTE_AFTER:
            return None
        if zygote is not None and not zygote.warm() and zygote.unfit:
            return None  # its forks cannot be spares here (zygote.py): spares start as their
            # own interpreters, and no other zygote starts for this environment
        if zygote is not None and not zygote.alive():
            zygote.close()
            zygote = None
        if zygote is None:
            zygote = self._zygotes[key] = Zygote(device, env)
        return zygote.fork()

    def pids(self) -> list[int]:
        return [self._spare[1].proc.pid] if self._spare is not None else []

    def zygote_pids(self) -> list[int]:
        return [pid for zygote in self._zygotes.values() for pid in zygote.pids()]

    def close(self) -> None:
        with self._turns:
            spare, self._spare = self._spare, None
            zygotes, self._zygotes = self._zygotes, {}
        if spare is not None:
            spare[1].kill()
        for zygote in zygotes.values():
            zygote.close()
