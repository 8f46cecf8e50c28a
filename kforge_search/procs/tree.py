"""Processes by ancestry and by a marker in their environment, read from /proc (Linux).

A marker is an environment entry NAME=VALUE set where a tree of processes starts: every
process below inherits it, whatever process group or session it moves to and whoever becomes
its parent, so it is found anywhere on the machine (unless it rewrote its environment).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str  # "R", "S", "D", "Z" (a zombie: dead, not yet reaped), ...
    start: int  # start time in clock ticks since boot: a pid and its start name one process
    comm: str = ""  # its name (a thread's, 15 bytes at most)
    cpu_s: float = 0.0  # user + system of its own threads (not its reaped children's)


def read_proc(pid: int) -> Proc | None:
    """One process, now; None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
        comm, after = raw.split("(", 1)[1].rsplit(")", 1)
        fields = after.split()  # after "comm)": state, ppid, ...
        cpu_s = (int(fields[11]) + int(fields[12])) / _TICK
        return Proc(pid, int(fields[1]), fields[0], int(fields[19]), comm, cpu_s)
    except (OSError, IndexError, ValueError):
        return None


def processes() -> dict[int, Proc]:
    """Every process on the machine, now."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (proc := read_proc(int(entry))) is not None:
            found[proc.pid] = proc
    return found


_WALK: list[bool] = []  # [whether the kernel has /proc/PID/task/TID/children], once known


def _children(pid: int) -> list[int] | None:
    """The process's children, from /proc/PID/task/*/children (None where the kernel has
    no such file, CONFIG_PROC_CHILDREN: then every process is read)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}/task/{task}"):
                return None  # the thread is there, its children file is not
        except (OSError, ValueError):
            continue
    return found


def _descendants_walked(root: int) -> list[int] | None:
    """descendants by walking the children files down from `root`: a few reads per
    process below it, not one per process on the machine (a parent watches its child's
    memory every few milliseconds)."""
    if _WALK and not _WALK[0]:
        return None
    found, todo = [], [root]
    while todo:
        kids = _children(todo.pop())
        if kids is None:
            _WALK[:] = [False]
            return None
        for pid in kids:
            proc = read_proc(pid)
            if proc is not None and proc.state != "Z":
                found.append(pid)
            todo.append(pid)
    return found


def descendants(root: int, procs: dict[int, Proc] | None = None) -> list[int]:
    """Living (not zombie) processes below `root`, by parentage."""
    if procs is None and (walked := _descendants_walked(root)) is not None:
        return walked
    procs = processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if procs[pid].state != "Z":
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def ended_children() -> Iterator[tuple[int, int]]:
    """Reap every child of this process that has ended: (pid, wait status) each."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def command_line(pid: int) -> str:
    """The process's command line, spaces between its arguments ("" when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def has_marker(pid: int, name: str, value: str) -> bool:
    """Whether the process's environment (as it started) holds NAME=VALUE."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{name}={value}".encode() in f.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def marked(name: str, value: str, procs: dict[int, Proc] | None = None) -> list[int]:
    """Living processes (this one excepted) whose environment holds NAME=VALUE."""
    procs = processes() if procs is None else procs
    me, uid = os.getpid(), os.getuid()
    found = []
    for proc in procs.values():
        if proc.pid == me or proc.state == "Z":
            continue
        with contextlib.suppress(OSError):
            if uid != 0 and os.stat(f"/proc/{proc.pid}").st_uid != uid:
                continue  # not ours: its environment cannot be read
            if has_marker(proc.pid, name, value):
                found.append(proc.pid)
    return found


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_all(
    find: Callable[[], Collection[int]], grace_s: float = 2.0, limit_s: float = 15.0
) -> list[int]:
    """End every process `find()` names: SIGTERM (SIGKILL at once when `grace_s` is 0), after
    `grace_s` SIGKILL (some of Ray's processes ignore SIGTERM), looking again until none is
    left or `limit_s` has passed. Returns the pids found on the first look."""
    first = list(find())
    if not first:
        return []
    signal_all(first, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    started = time.monotonic()
    while (left := find()) and time.monotonic() - started < limit_s:
        if time.monotonic() - started >= grace_s:
            signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
    return first


def end_marked(name: str, value: str, grace_s: float = 2.0, limit_s: float = 15.0) -> list[int]:
    """End every process marked NAME=VALUE (end_all)."""
    return end_all(lambda: marked(name, value), grace_s, limit_s)


def rss_mb(pids: Iterable[int]) -> float:
    """Resident memory of these processes together, in MiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/statm") as f:
            total += int(f.read().split()[1]) * _PAGE
    return total / 2**20


def tree_rss_mb(root: int) -> float:
    """Resident memory of every process below `root` (not `root` itself), in MiB."""
    return rss_mb(descendants(root))


def _prctl(option: int, value: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphans below this process become its children (not init's): PR_SET_CHILD_SUBREAPER."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def close_fds(keep: Collection[int] = ()) -> None:
    """Close every descriptor of this process above stderr, but `keep`."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2 and int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))


def make_dumpable() -> bool:
    """Dumpable again, as an exec'd process is (a forked spare: evaluator/zygote.py)."""
    return _prctl(PR_SET_DUMPABLE, 1)


def make_undumpable() -> bool:
    """No core dump, and no ptrace or /proc/PID/mem from processes without privileges."""
    return _prctl(PR_SET_DUMPABLE, 0)
