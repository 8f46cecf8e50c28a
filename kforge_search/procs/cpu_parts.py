"""Where a host's CPU time goes, by part: every process's CPU seconds (/proc/PID/stat),
summed by what the process is at each sample.

An evaluator's child names itself by its mode and stage (`name_self`: "kf.cand.verify",
"kf.cand.compile", "kf.ref.setup", "kf.spare"), so a sampler tells a candidate's compile
from its verification and from a spare's start-up without any message from it. Ray's
actors carry their class in their title ("ray::EvaluatorActor"), compilers their own
names (ptxas, cc1plus). A process that starts and ends between two samples is not seen:
`Parts.unseen` is what the host's own counter has beyond the parts.

Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field

from kforge_search.procs import tree

PR_SET_NAME = 15
COMPILERS = frozenset(
    {"ptxas", "cicc", "nvcc", "nvlink", "fatbinary", "cc1", "cc1plus", "as", "ld", "ld.lld"}
    | {"collect2", "gcc", "g++", "c++", "cc", "clang", "clang++", "ninja"}
)
RAY_RUNTIME = ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env")
MODE_SHORT = {"candidate": "cand", "reference": "ref", "oracle": "orc", "baseline": "base"}


def name_self(name: str) -> None:
    """This process's name (its main thread's, 15 bytes at most: /proc/PID/stat's comm).
    Through prctl, not /proc/self/comm: a Landlock-confined child may not write files."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def child_name(mode: str, stage: str) -> str:
    """An evaluator child's name in one stage: "kf.cand.verify"."""
    return f"kf.{MODE_SHORT.get(mode, mode[:4])}.{stage}"[:15]


def kind(comm: str, cmdline: str) -> str:
    """What a process is, for the parts: an evaluator child's own name, a Ray actor's class,
    "ray runtime", "compilers", "kforge" (a driver or keeper), or "other"."""
    if comm.startswith("kf."):
        return comm
    if cmdline.startswith("ray::"):
        return cmdline.split()[0].split(".")[0]
    if comm in COMPILERS:
        return "compilers"
    if comm in RAY_RUNTIME[:2] or any(r in cmdline for r in RAY_RUNTIME[2:]):
        return "ray runtime"
    if "kforge" in cmdline:
        return "kforge"
    return "other"


def snapshot() -> dict[tuple[int, int], tree.Proc]:
    """Every process now, keyed by (pid, start time): a reused pid is another process."""
    return {(p.pid, p.start): p for p in tree.processes().values()}


@dataclass
class Parts:
    """CPU seconds by kind since the first `sample()`; a process's seconds go to what it was
    when sampled (a child's stage changes its name)."""

    seconds: dict[str, float] = field(default_factory=dict)
    _last: dict[tuple[int, int], float] = field(default_factory=dict)
    _started: bool = False

    def sample(self) -> dict[str, float]:
        """Take a sample; the running sums (a copy)."""
        now = snapshot()
        for key, proc in now.items():
            before = self._last.get(key)
            if before is None and not self._started:
                before = proc.cpu_s  # running before the first sample: from here on
            delta = proc.cpu_s - (before or 0.0)
            if delta > 0:
                # read again each time: a Ray worker's title changes when it takes an actor
                cmdline = "" if proc.comm.startswith("kf.") else tree.command_line(proc.pid)
                name = kind(proc.comm, cmdline)
                self.seconds[name] = self.seconds.get(name, 0.0) + delta
        self._last = {k: p.cpu_s for k, p in now.items()}
        self._started = True
        return dict(self.seconds)
