"""Ends what a command's own Ray cluster leaves behind, however the command ends.

`kforge search` starts a local Ray cluster: GCS, raylet, dashboard and runtime-env agents,
workers, and below them evaluator children and their compilers. A CLI killed with SIGKILL
cannot stop them, and some of Ray's agents ignore SIGTERM. `watched()` marks everything the
command starts from then on (MARK=<token> in the environment) and starts a watcher
(`python -S -m kforge_search.procs.watch`, in a session of its own). The watcher notes,
twice a second, every process below the command started since, and every marked one (Ray's
agents rewrite their environment's memory with their process title: the mark alone misses
them). When the command ends, however it ends, or when the block ends, the watcher ends
all of them and what they started (SIGTERM, then SIGKILL). Its record of the session
(cache_dir()/sessions/TOKEN.json, with the processes seen) stays until they are gone: were
the watcher killed too, the next `watched()` ends them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from kforge_search.procs.tree import descendants, end_all, marked, processes, read_proc

MARK = "KFORGE_SESSION"
POLL_S = 0.5
END_WAIT_S = 60.0  # the watcher's grace (2 s) and kill limit (15 s), and then some

Seen = dict[int, int]  # pid -> start time (ticks since boot): one process, not a reused pid


def start_of(pid: int) -> int:
    """The process's start time (ticks since boot), 0 when it does not exist."""
    proc = read_proc(pid)
    return proc.start if proc is not None and proc.state != "Z" else 0


def alive(pid: int, start: int) -> bool:
    return start > 0 and start_of(pid) == start


def session_processes(seen: Seen, token: str) -> set[int]:
    """The session's living processes: those seen (the same processes, not reused pids),
    the marked ones, and everything below them; never this process."""
    procs = processes()
    found = {p for p, st in seen.items() if p in procs and procs[p].start == st}
    found |= set(marked(MARK, token, procs))
    for pid in list(found):
        found |= set(descendants(pid, procs))
    found.discard(os.getpid())
    return {p for p in found if procs.get(p) is not None and procs[p].state != "Z"}


def sessions_dir() -> Path:
    from kforge_search.paths import cache_dir

    path = cache_dir() / "sessions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sweep(folder: Path) -> list[int]:
    """End the processes of sessions whose command and watcher are both gone (the watcher
    killed with its command); returns the pids found."""
    ended: list[int] = []
    for record in folder.glob("*.json"):
        try:
            data = json.loads(record.read_text())
            owner, watcher = tuple(data["owner"]), tuple(data["watcher"])
            seen = {int(p): int(st) for p, st in data.get("seen", {}).items()}
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive(*owner) or alive(*watcher):
            continue
        ended += end_all(lambda s=seen, t=record.stem: session_processes(s, t))
        record.unlink(missing_ok=True)
    return ended


@contextlib.contextmanager
def watched(folder: Path | None = None) -> Iterator[str]:
    """Mark what this process starts inside the block; end all of it when the block ends,
    or, through the watcher, when this process dies. Yields the session's token."""
    folder = folder or sessions_dir()
    sweep(folder)
    token = uuid.uuid4().hex
    record = folder / f"{token}.json"
    env = {k: v for k, v in os.environ.items() if k != MARK}  # the watcher carries no mark
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    watcher = subprocess.Popen(
        [sys.executable, "-S", "-m", "kforge_search.procs.watch", str(os.getpid()), str(record)],
        stdin=subprocess.PIPE,  # closed: the block ended (or this process died)
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # a terminal's Ctrl-C to this command's group does not reach it
    )
    previous = os.environ.get(MARK)
    os.environ[MARK] = token
    try:
        yield token
    finally:
        if previous is None:
            os.environ.pop(MARK, None)
        else:
            os.environ[MARK] = previous
        assert watcher.stdin is not None
        watcher.stdin.close()  # the watcher ends the session's processes, then exits
        try:
            watcher.wait(timeout=END_WAIT_S)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()


def _write(record: Path, owner: tuple[int, int], seen: Seen) -> None:
    data = {"owner": owner, "watcher": (os.getpid(), start_of(os.getpid())), "seen": seen}
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, record)


def main(argv: list[str]) -> None:
    """The watcher: OWNER_PID RECORD (the record's name is the session's token)."""
    owner, record = int(argv[1]), Path(argv[2])
    token, owner_start, since = record.stem, start_of(owner), start_of(os.getpid())
    seen: Seen = {}
    _write(record, (owner, owner_start), seen)
    while alive(owner, owner_start) and not select.select([0], [], [], POLL_S)[0]:
        procs = processes()
        now = {p: procs[p].start for p in descendants(owner, procs) if procs[p].start >= since}
        now |= {p: procs[p].start for p in marked(MARK, token, procs)}
        now.pop(os.getpid(), None)
        if not now.keys() <= seen.keys():
            seen |= now
            _write(record, (owner, owner_start), seen)
    end_all(lambda: session_processes(seen, token))
    record.unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv)
