"""A zygote: one warm process per evaluator and environment that has imported torch, Triton
and cpp_extension once, and forks each spare child from there.

A spare started as a fresh interpreter paid for those imports every time: on a 2-CPU machine
3.2 of an evaluation's 6.2 CPU-seconds (cpu-cpp, `kforge bench --throughput`), and its
warm-up holds the CPU device's lock, so a timing waited for it. A fork of a warm process
starts in ~40 ms. Each candidate still gets a process of its own that ran nothing before.

What a fork is: the zygote forks a keeper (procs/keeper.py: a session leader and child
subreaper that ends everything below it), and the keeper forks the spare, which takes the
evaluator's pipes (stdin, output, events) as its own and goes on as a spare does
(standby.py: the device's part of the warm-up, "ready", its job). The zygote reaps the
keeper and writes its exit status on the evaluator's status pipe (forked.ForkedProc).
Nothing touches a device in the zygote: CUDA does not survive a fork, so each spare starts
its own context. Even asking whether CUDA is there does harm: torch.cuda.is_available()
(which importing torch.utils.cpp_extension calls where nvcc is found) initializes the driver
and marks every later fork "bad" (torch then refuses CUDA in it; on the H100 every forked
spare exited with code 1 before its job). So the zygote warms up with PyTorch's fork-safe
check (standby.fork_safe_cuda_check), then forks one probe that asks whether a fork gets CUDA;
when it does not, the zygote answers "unfit REASON" instead of "ready" and its evaluator's
spares start as their own interpreters, as before (spare.py). The zygote ends when its
evaluator closes the control socket (or dies).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from kforge_search.evaluator.forked import ForkedProc
from kforge_search.evaluator.sandbox import EVAL_TOKEN, Spawned, spawn
from kforge_search.procs import tree
from kforge_search.procs.cpu_parts import name_self

REPLY_S = 30.0  # a fork's answer (the zygote answers between forks; each takes ~ms)


# ---- the zygote's side (worker.py: `--zygote DEVICE CONTROL_FD EVENT_FD`)


def serve(
    control_fd: int,
    warm_up: Callable[[], None],
    body: Callable[[int], int],
    unfit: Callable[[], str] = lambda: "",
) -> int:
    """Warm up, say "ready", then fork a keeper and its spare per request until the control
    socket closes; `body(event_fd)` is the spare's life (its exit code). `unfit()`, asked in a
    forked probe: why a fork could not do a spare's work ("" when it can); when it says so, the
    zygote answers "unfit REASON" and ends."""
    name_self("kf.zygote")
    warm_up()
    ctl = socket.socket(fileno=control_fd)
    if reason := probe(unfit):
        ctl.sendall(f"unfit {reason}\n".encode())
        return 0
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    statuses: dict[int, int] = {}  # keeper pid -> the evaluator's status pipe
    ctl.sendall(b"ready\n")
    while True:
        readable = select.select([ctl, wake_r], [], [])[0]
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            _reap(statuses)
        if ctl not in readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(ctl, 1024, 4)
        except OSError:
            message, fds = b"", []
        if not message or len(fds) != 4:  # the evaluator has gone (or sent nonsense)
            for fd in fds:
                os.close(fd)
            return 0
        pid = os.fork()
        if pid == 0:
            _keeper(fds, message.decode().split()[-1], body, (ctl.fileno(), wake_r, wake_w))
        for fd in fds[:3]:
            os.close(fd)
        statuses[pid] = fds[3]
        ctl.sendall(f"{pid}\n".encode())


def probe(unfit: Callable[[], str]) -> str:
    """What `unfit()` says in a fork of this process ("" when the fork can do a spare's work);
    the fork's answer comes back on a pipe."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_fd)
            os.write(write_fd, unfit().encode()[:512] or b"-")
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as answer:
        said = answer.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not said:
        return f"the probe fork failed (exit status {os.waitstatus_to_exitcode(status)})"
    return "" if said == "-" else said


def _reap(statuses: dict[int, int]) -> None:
    for pid, status in tree.ended_children():
        fd = statuses.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def _keeper(fds: list[int], token: str, body: Callable[[int], int], ours: tuple[int, ...]) -> None:
    """In the forked keeper: its own session, then a keeper's life around the spare."""
    from kforge_search.procs.keeper import WAKE, Keeper, exit_as

    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (*ours, fds[3]):
            os.close(fd)
        os.setsid()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, WAKE)
        keeper = Keeper([], mask, run=lambda: _spare(fds[:3], token, body))
        keeper.start()
        keeper.wait()
        keeper.end_all()
        exit_as(keeper.status)
    finally:
        os._exit(125)


def _spare(fds: list[int], token: str, body: Callable[[int], int]) -> None:
    """In the spare: the evaluator's pipes as stdin, stdout and stderr, nothing else of the
    zygote's open, dumpable as an exec'd process is (the evaluator reads its /proc), marked
    with its own token for what it starts."""
    stdin_r, out_w, event_w = fds
    os.dup2(stdin_r, 0)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    tree.close_fds(keep=(event_w,))
    tree.make_dumpable()
    os.environ[EVAL_TOKEN] = token
    code = 1
    try:
        code = body(event_w)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


# ---- the evaluator's side


class Zygote:
    """A zygote for one device and environment; `fork()` a spare once it is warm."""

    def __init__(self, device: str, env: Mapping[str, str]):
        self._ctl, theirs = socket.socketpair()
        try:
            args, fd = ["--zygote", device, str(theirs.fileno())], theirs.fileno()
            self.spawned = spawn(args, Path(tempfile.gettempdir()), env, pass_fds=(fd,))
        finally:
            theirs.close()
        self._buffer = b""
        self._warm = False
        self.unfit = ""  # why its forks cannot be spares, once it said so (then it ends)
        self._lock = threading.Lock()

    def warm(self) -> bool:
        """Whether it has said "ready" (False while it imports, once it is gone, or when it
        said its forks are unfit: `unfit`)."""
        if not self._warm and not self.unfit:  # its last words, too, after it ended
            line = self._line(0.0)
            self._warm = line == "ready"
            if line.startswith("unfit"):
                self.unfit = line.partition(" ")[2] or "unfit"
        return self._warm and self.alive()

    def pids(self) -> list[int]:
        """Its own processes (the stub, the keeper and the zygote), not the ones it forked."""
        chain = [self.spawned.proc.pid]
        procs = tree.processes()
        for _ in range(2):  # the stub's keeper, the keeper's command (procs/keeper.py)
            below = [p.pid for p in procs.values() if p.ppid == chain[-1] and p.state != "Z"]
            if not below:
                break
            chain.append(below[0])
        return chain

    def alive(self) -> bool:
        return self.spawned.proc.poll() is None

    def fork(self) -> Spawned | None:
        """A spare forked from the warm zygote; None when it cannot (not warm, gone)."""
        if not self.warm():
            return None
        token = uuid.uuid4().hex
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        event_r, event_w = os.pipe()
        status_r, status_w = os.pipe()
        theirs = [stdin_r, out_w, event_w, status_w]
        with self._lock:
            try:
                socket.send_fds(self._ctl, [f"fork {token}".encode()], theirs)
                reply = self._line(REPLY_S)
            except OSError:
                reply = ""
            finally:
                for fd in theirs:
                    os.close(fd)
        if not reply.isdigit():
            for fd in (stdin_w, out_r, event_r, status_r):
                os.close(fd)
            self._warm = False
            return None
        proc = ForkedProc(int(reply), os.fdopen(stdin_w, "wb"), os.fdopen(out_r, "rb"), status_r)
        return Spawned(proc, event_r, token)

    def _line(self, timeout: float) -> str:
        while b"\n" not in self._buffer:
            if not select.select([self._ctl], [], [], timeout)[0]:
                return ""
            chunk = self._ctl.recv(4096)
            if not chunk:
                return ""
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        """Its socket closed (it ends, and the keepers it forked see it go), then its tree."""
        with contextlib.suppress(OSError):
            self._ctl.close()
        self.spawned.kill()
