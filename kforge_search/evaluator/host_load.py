"""Whether a timing was taken on a loaded host: the cores that other processes kept busy
while a child timed (the parent's measurement, from /proc: the child cannot forge it).

A bench's figures are the machine's only when nothing else ran beside its timings. On the
2-CPU machine, level 1 on cpu-cpp with the test suite beside it reported 49_Max at 174x and
40_LayerNorm at 74x; at rest they were 0.77x and 0.33x: the baselines were timed slower by
a steady load, with a tight spread (p80/p20), so the spread check (baselines.py) passed them
and the cache kept them. Here: busy CPU time of the whole machine (steal included: a VM's
cores given to others) less the child's own process tree's, over the window's wall time.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# other processes' cores at or above max(LOADED_CORES, LOADED_SHARE x the machine's cores),
# on average over a timing: the timing is not the machine's own
LOADED_CORES = 0.5
LOADED_SHARE = 0.25
# a shorter window tells nothing: /proc/stat counts in ticks (10 ms), one tick more or less
# in a 20 ms window is half a core
MIN_WINDOW_S = 0.2
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_cores() -> int:
    """The cores /proc/stat counts (the machine's, which its busy time is over)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return os.cpu_count() or 1
    return max(1, sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit()))


def loaded(others: float, cores: int | None = None) -> bool:
    """Whether `others` cores busy elsewhere make a timing not the machine's own."""
    cores = machine_cores() if cores is None else cores
    return others >= max(LOADED_CORES, LOADED_SHARE * cores)


def host_timed(method: str) -> bool:
    """Whether a timing method is the host's clock (a CPU platform's): the runs it times are
    the ones the host's other load bends; the device's events are not probed at all (no
    /proc scans on a GPU's timing path)."""
    return method != "cuda_events"


def bent(timing: Any) -> bool:
    """Whether the host's other load may have bent a timing (a TimingStats): one the host's
    clock took (a CPU platform's) with others at loaded's bound. Runs timed by the device's
    own events are not slowed alike by the host's load: their figure is kept, not acted on
    (a GPU bench's 12 jobs beside each other load a 64-core host all the time)."""
    return host_timed(timing.method) and loaded(timing.host_others)


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy (all cores; steal included), or None
    where /proc/stat cannot be read."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user already)
    ticks = [int(x) for x in first[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK


def tree_seconds(root: int) -> float:
    """CPU seconds of process `root` and its descendants (their threads included; children
    that ended and were waited for too), 0.0 for what cannot be read."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        spent[pid] = sum(int(x) for x in fields[11:15]) / _TICK
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(kids)
        frontier.extend(kids)
    return sum(spent.get(p, 0.0) for p in tree)


@dataclass(frozen=True)
class LoadProbe:
    """A window from start() to others(): the cores other processes than `pid`'s tree kept
    busy in it, on average."""

    pid: int
    wall: float
    busy: float | None
    own: float

    @classmethod
    def start(cls, pid: int) -> LoadProbe:
        return cls(pid, time.monotonic(), busy_seconds(), tree_seconds(pid))

    def others(self, extend: bool = False) -> float:
        """Other processes' cores, on average over the window (0.0 where unknown, or where the
        window was too short to tell: MIN_WINDOW_S). `extend`: a shorter window is waited out
        to MIN_WINDOW_S first (the load just after a timing stands for the load during it:
        a steady load is what a tight spread hides)."""
        wall = time.monotonic() - self.wall
        if extend and wall < MIN_WINDOW_S:
            time.sleep(MIN_WINDOW_S - wall)
            wall = time.monotonic() - self.wall
        if wall < MIN_WINDOW_S or self.busy is None:
            return 0.0
        busy, own = busy_seconds(), tree_seconds(self.pid)
        if busy is None:
            return 0.0
        # a child that ended meanwhile takes its time with it: never below zero
        return max(0.0, (busy - self.busy) - max(0.0, own - self.own)) / wall
