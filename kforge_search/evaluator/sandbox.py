"""A killable child process with limits per stage on wall clock, memory and output.

The child runs under a keeper (procs/keeper.py), in a session of its own: the keeper owns
every process below it, whatever process group it moves to and whoever forked it (a hung
kernel, ninja's compilers, what the candidate started), and ends them all with the child.
Each child also carries a marker of its own in its environment (EVAL_TOKEN): what somehow
left the keeper's tree is found by it and ended too.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_search.evaluator.forked import ForkedProc
from kforge_search.evaluator.phases import Phases, marks_to_phases
from kforge_search.procs import tree

EVAL_TOKEN = "KFORGE_EVAL_TOKEN"  # NAME=<one child's token> marks every process of that child
KEEPER = ("-S", "-m", "kforge_search.procs.keeper")  # run by this Python, before the command
KEEPER_WAIT_S = 40.0  # the keeper's own kill limit (30 s), and then some
# a file: each child's events as the parent got them ("pid t <type> [stage|on]") and each
# line the parent sent ("pid t > line"), for reading a lane's waits against the lock journal
EVENT_JOURNAL_ENV = "KFORGE_EVENT_JOURNAL"


@dataclass(frozen=True)
class Limits:
    stage_timeouts_s: tuple[tuple[str, float], ...] = ()
    default_timeout_s: float = 300.0
    memory_mb: int = 0  # 0: no limit
    output_bytes: int = 32 * 2**20  # the child is killed past this much output
    keep_bytes: int = 16 * 2**10  # how much of the head and of the tail is kept

    def timeout(self, stage: str) -> float:
        for name, seconds in self.stage_timeouts_s:
            if stage == name or stage.startswith(f"{name}-"):
                return seconds
        return self.default_timeout_s


@dataclass(frozen=True)
class ChildExit:
    returncode: int | None
    signal_name: str  # e.g. "SIGSEGV" when a signal ended it by itself, else ""
    killed: str  # why the parent killed it: "", "timeout", "memory", "output"
    stage: str  # the last stage the child announced
    output: str  # what it printed (head and tail)
    output_bytes: int
    peak_rss_mb: float = 0.0


class _Output:
    """Keeps the head and tail of a stream and counts the rest."""

    def __init__(self, keep: int):
        self.keep = keep
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= self.keep:
                self.tail_len -= len(self.tail.popleft())

    def text(self) -> str:
        tail = b"".join(self.tail)[-self.keep :]
        skipped = self.total - len(self.head) - len(tail)
        middle = f"\n[... {skipped} bytes of output skipped ...]\n".encode() if skipped > 0 else b""
        return (bytes(self.head) + middle + tail).decode(errors="replace")


@dataclass
class Child:
    """One evaluator child process; use as a context manager so it is always killed."""

    job_path: Path
    cwd: Path
    limits: Limits
    env: Mapping[str, str] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()  # a wrapper command (e.g. ncu ...) the child runs under
    stage: str = "start"
    exit: ChildExit | None = None

    spare: Spawned | None = None  # a warm child waiting for its job (evaluator/spare.py)
    keep_alive: bool = False  # set while inside `with`: the child outlives it (the oracle)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def running(self) -> bool:
        """Whether the process is still there (what has not been read may wait)."""
        return self.exit is None and self._proc.poll() is None

    def __enter__(self) -> Child:
        if self.spare is not None and not self.prefix and self.spare.take(self.job_path):
            spawned = self.spare
        else:
            if self.spare is not None:
                self.spare.kill()
            spawned = spawn([str(self.job_path)], self.cwd, self.env, self.prefix)
        self._proc, read_fd, self._token = spawned.proc, spawned.read_fd, spawned.token
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._output = _Output(self.limits.keep_bytes)
        self._stage_started = time.monotonic()
        self._compile_started = 0.0  # the worker said it compiles (evaluator/compiling.py)
        self._marks = [("start", self._stage_started)]
        self._ended = 0.0
        self._killed = ""
        self._peak_rss = 0.0
        self._threads = [
            threading.Thread(target=self._read_events, args=(read_fd,), daemon=True),
            threading.Thread(target=self._read_output, daemon=True),
        ]
        self._journal(f"spawned {self.job_path.parent.name}")
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.keep_alive or exc[0] is not None:
            self.kill("")

    def _read_events(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for line in pipe:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self._journal(f"{event.get('type')} {event.get('stage', event.get('on', ''))}")
                self._events.put(event)
        self._events.put(None)

    def _read_output(self) -> None:
        assert self._proc.stdout is not None
        while chunk := self._proc.stdout.read1(65536):  # type: ignore[attr-defined]
            self._output.add(chunk)

    def _journal(self, what: str) -> None:
        if journal := os.environ.get(EVENT_JOURNAL_ENV):
            with open(journal, "a") as f:
                f.write(f"{self._proc.pid} {time.time():.6f} {what}\n")

    def note(self, what: str) -> None:
        """A line of the parent's own in the event journal, beside this child's ("= what")."""
        self._journal(f"= {what}")

    def send(self, line: str) -> None:
        self._journal(f"> {line}")
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(f"{line}\n".encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def ask(self, line: str) -> None:
        """A request to a child that waited idle for it (the oracle): the stage's clock
        starts now, not when the child last spoke."""
        self._stage_started = time.monotonic()
        self.send(line)

    def resume_after(self, wait: Callable[[], object], line: str = "go") -> None:
        """`wait()`, then `line` to the child, which waited for it (a pause at a safe point
        while a timing had the device: Channel.safe_point): the wait does not count in the
        child's stage time."""
        started = time.monotonic()
        wait()
        waited = time.monotonic() - started
        self._stage_started += waited
        if self._compile_started:  # a compile inside an autotuner's trials came back
            self._compile_started += waited
        self.send(line)

    def kill(self, why: str) -> None:
        if why and not self._killed:
            self._killed = why
        end_tree(self._proc, self._token)
        self._finish()

    def _finish(self) -> None:
        if self.exit is not None:
            return
        self._ended = time.monotonic()
        for thread in self._threads:
            thread.join(timeout=2)
        code = self._proc.returncode
        signal_name = ""
        if code is not None and code < 0 and not self._killed:
            signal_name = signal.Signals(-code).name
        self.exit = ChildExit(
            returncode=code,
            signal_name=signal_name,
            killed=self._killed,
            stage=self.stage,
            output=self._output.text(),
            output_bytes=self._output.total,
            peak_rss_mb=self._peak_rss,
        )

    def phases(self) -> Phases:
        """Seconds per announced stage, from the spawn until the child ended (or now)."""
        return marks_to_phases(self._marks, self._ended or time.monotonic())

    def _compiling(self, on: bool) -> None:
        """While the worker compiles, the build limit runs and the stage's clock stands."""
        now = time.monotonic()
        if on and not self._compile_started:
            self._compile_started = now
        elif not on and self._compile_started:
            self._stage_started += now - self._compile_started
            self._compile_started = 0.0

    def _check_limits(self) -> str:
        now = time.monotonic()
        if self._compile_started:
            if now - self._compile_started > self.limits.timeout("build"):
                return "timeout"
        elif now - self._stage_started > self.limits.timeout(self.stage):
            return "timeout"
        if self._output.total > self.limits.output_bytes:
            return "output"
        if self.limits.memory_mb:
            rss = tree.tree_rss_mb(self._proc.pid)  # below the keeper: the child and its own
            self._peak_rss = max(self._peak_rss, rss)
            if rss > self.limits.memory_mb:
                return "memory"
        return ""

    def next_event(self) -> dict[str, Any] | None:
        """The next event; None once the child has ended (then `exit` says how)."""
        while self.exit is None:
            try:
                event = self._events.get(timeout=0.1)
            except queue.Empty:
                if why := self._check_limits():
                    self.kill(why)
                    return None
                continue
            if event is None:  # the child closed its event pipe: it is ending
                try:
                    self._proc.wait(timeout=self.limits.timeout(self.stage))
                except subprocess.TimeoutExpired:
                    self._killed = "timeout"
                self.kill("")
                return None
            if event.get("type") == "ready":  # a spare's warm-up ended: not the job's
                continue
            if event.get("type") == "compiling":
                self._compiling(bool(event.get("on")))
                continue
            if event.get("type") == "stage":
                self.stage = str(event.get("stage"))
                self._stage_started = time.monotonic()
                self._compile_started = 0.0
                self._marks.append((self.stage, self._stage_started))
            return event
        return None


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """A worker's environment: ours, the platform's and the package on PYTHONPATH. Where
    `env` gives the children a bytecode folder of their own (PYTHONPYCACHEPREFIX:
    paths.pycache_dir), they write to it (writable_bytecode)."""
    full = writable_bytecode({**os.environ, **env, "PYTHONUNBUFFERED": "1"}, env)
    package_root = str(Path(__file__).resolve().parents[2])
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, full.get("PYTHONPATH")]))
    return full


def writable_bytecode(full: dict[str, str], ours: Mapping[str, str]) -> dict[str, str]:
    """`full` without PYTHONDONTWRITEBYTECODE where `ours` sets PYTHONPYCACHEPREFIX: with a
    prefix Python reads bytecode only from there, so a prefix nobody may write to makes
    every process compile every module it imports (torch: ~3 s more per child on a 2-CPU
    machine whose image sets PYTHONDONTWRITEBYTECODE=1). The prefix is kforge's cache, not
    the user's tree; a candidate's child still writes none (worker.main)."""
    if "PYTHONPYCACHEPREFIX" in ours:
        full.pop("PYTHONDONTWRITEBYTECODE", None)
    return full


@dataclass
class Spawned:
    """A worker process and the read end of its event pipe."""

    # the keeper, which runs the worker (procs/keeper.py); or one forked by a zygote
    proc: subprocess.Popen[bytes] | ForkedProc
    read_fd: int
    token: str  # its EVAL_TOKEN

    def wait_ready(self, timeout: float) -> bool:
        """Wait until a standby worker says its warm-up ended (its first event, "ready":
        nothing else is written before its job); False when it ended or did not say so in
        `timeout` seconds. Reads only that line: the events after it stay in the pipe."""
        line, deadline = b"", time.monotonic() + timeout
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                return False
            chunk = os.read(self.read_fd, 1)
            if not chunk:
                return False
            line += chunk
        try:
            return json.loads(line).get("type") == "ready"
        except ValueError:
            return False

    def take(self, job_path: Path) -> bool:
        """Hand a waiting (standby) worker its job; False when it is gone."""
        if self.proc.poll() is not None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(f"{job_path}\n".encode())
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def kill(self) -> None:
        end_tree(self.proc, self.token)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


def spawn(
    args: list[str],
    cwd: Path,
    env: Mapping[str, str],
    prefix: tuple[str, ...] = (),
    pass_fds: tuple[int, ...] = (),
) -> Spawned:
    """`python -m kforge_search.evaluator.worker ARGS... FD` under a keeper, in a session of
    its own, marked with a token of its own (`pass_fds`: more of ours it keeps open)."""
    read_fd, write_fd = os.pipe()
    cmd = [sys.executable, *KEEPER, *prefix, sys.executable, "-m", "kforge_search.evaluator.worker"]
    token = uuid.uuid4().hex
    try:
        proc = subprocess.Popen(
            [*cmd, *args, str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd, *pass_fds),
            cwd=cwd,
            env=child_env({**env, EVAL_TOKEN: token}),
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    return Spawned(proc, read_fd, token)


def end_tree(proc: subprocess.Popen[bytes] | ForkedProc, token: str) -> None:
    """End a child and everything it started: its keeper kills the whole tree (and exits as
    the child did); a keeper that does not answer is killed with its process group; then
    whatever still carries the child's token, anywhere on the machine."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=KEEPER_WAIT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    tree.end_marked(EVAL_TOKEN, token, grace_s=0)


def make_undumpable() -> None:
    """Keep evaluator children (which drop their capabilities) out of this process's memory,
    where reference outputs live: /proc/PID/mem and ptrace need dumpable or CAP_SYS_PTRACE."""
    tree.make_undumpable()
