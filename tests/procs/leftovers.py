"""What tests look for after they end something: processes with a marker in their
environment, anywhere on the machine (procs/tree.py), less an evaluator's idle spare."""

from __future__ import annotations

import time
from collections.abc import Iterable

from kforge_search.procs.tree import command_line, descendants, marked


def left(
    mark: str, token: str, spare: Iterable[int] = (), wait_s: float = 0.0, alone: Iterable[int] = ()
) -> list[str]:
    """Marked processes (pid: command line) other than `spare` and what runs below it, and
    `alone` (a zygote's own processes: not what it forked), after at most `wait_s` for them
    to end."""
    spare, alone = list(spare), set(alone)
    deadline = time.monotonic() + wait_s
    while True:
        allowed = {*spare, *alone, *(p for s in spare for p in descendants(s))}
        found = [p for p in marked(mark, token) if p not in allowed]
        if not found or time.monotonic() > deadline:
            return [f"{p}: {command_line(p)[:200]}" for p in found]
        time.sleep(0.1)


def named(mark: str, token: str, comm: str) -> list[int]:
    """Marked processes whose name (/proc/PID/comm) is `comm`."""
    found = []
    for pid in marked(mark, token):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == comm:
                    found.append(pid)
        except OSError:
            continue
    return found
