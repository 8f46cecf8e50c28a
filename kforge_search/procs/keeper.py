"""`python -S -m kforge_search.procs.keeper CMD...`: runs CMD and owns every process it starts.

The evaluator starts each child through a keeper. The keeper is a child subreaper
(PR_SET_CHILD_SUBREAPER), so what CMD's descendants leave behind becomes its child instead
of init's: ninja's commands in process groups of their own, a double-forked sleeper, a
process a candidate forks from C++. It ends all of them, kills what is left below it and
reaps it, when

- CMD ends (a process CMD left running would outlive the job otherwise),
- the evaluator asks (SIGTERM or SIGHUP: the evaluator's kill),
- the evaluator goes away (killed: its parent changes; checked twice a second).

The process the evaluator starts is a stub: it forks the keeper proper and relays to it.
A Ray worker kills its direct children with SIGKILL when its actor is killed, and a keeper
killed so could end nothing; the keeper below the stub sees the stub go and ends the tree.
Both exit as CMD did (CMD's exit code, or the signal that ended CMD), so the evaluator
reads CMD's own status. Neither holds CMD's pipes nor prints anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

from kforge_search.procs.tree import (
    become_subreaper,
    close_fds,
    descendants,
    ended_children,
    make_undumpable,
    signal_all,
)

WAKE = {signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP}
PARENT_CHECK_S = 0.5
KILL_LIMIT_S = 30.0  # a process in uninterruptible sleep (a GPU driver's teardown) may take this


class Stub:
    """The evaluator's direct child: forks the keeper, forwards the evaluator's request to
    end (or the evaluator's death) to it, and exits as it did."""

    def __init__(self) -> None:
        self.parent = os.getppid()
        self.keeper = 0
        self.mask: set[signal.Signals] = set()  # before WAKE was blocked: CMD's

    def start(self) -> bool:
        """Fork the keeper; True in the keeper, False in the stub."""
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, WAKE)
        self.keeper = os.fork()
        return self.keeper == 0

    def relay(self) -> int | None:
        """Until the keeper ends; its wait status."""
        _let_go_of_pipes()
        asked = False
        while True:
            info = signal.sigtimedwait(WAKE, PARENT_CHECK_S)
            gone = os.getppid() != self.parent
            if not asked and (gone or (info is not None and info.si_signo != signal.SIGCHLD)):
                asked = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.keeper, signal.SIGTERM)
            pid, status = os.waitpid(self.keeper, os.WNOHANG)
            if pid == self.keeper:
                return status


class Keeper:
    """`cmd` run as its child (exec'd), or `run` (a function that ends with os._exit: a
    process forked from a warm one, evaluator/zygote.py)."""

    def __init__(
        self, cmd: list[str], mask: set[signal.Signals], run: Callable[[], None] | None = None
    ):
        self.cmd, self.mask, self.run = cmd, mask, run
        self.parent = os.getppid()
        self.child = 0
        self.status: int | None = None  # CMD's wait status, once reaped

    def start(self) -> None:
        become_subreaper()
        make_undumpable()
        self.child = os.fork()
        if self.child == 0:  # CMD: the signal mask survives exec, so put it back first
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            try:
                if self.run is not None:
                    self.run()
                else:
                    os.execvp(self.cmd[0], self.cmd)
            finally:
                os._exit(127)
        _let_go_of_pipes()

    def reap(self) -> None:
        """Wait for every child that has ended (orphans included); note CMD's status."""
        for pid, status in ended_children():
            if pid == self.child:
                self.status = status

    def wait(self) -> None:
        """Until CMD ends, the evaluator asks, or the evaluator is gone."""
        while self.status is None:
            info = signal.sigtimedwait(WAKE, PARENT_CHECK_S)
            if info is not None and info.si_signo != signal.SIGCHLD:
                return
            self.reap()
            if os.getppid() != self.parent:
                return

    def end_all(self) -> None:
        """Kill every process below this one until none is left; reap them all."""
        deadline = time.monotonic() + KILL_LIMIT_S
        while True:
            left = descendants(os.getpid())
            signal_all(left, signal.SIGKILL)
            self.reap()
            if (not left and self.status is not None) or time.monotonic() > deadline:
                return
            signal.sigtimedwait({signal.SIGCHLD}, 0.02)


def _let_go_of_pipes() -> None:
    """Close this process's copies of CMD's stdin, stdout and event pipe: the evaluator sees
    them close when CMD (and what it started) closes them, not when the keeper exits."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    close_fds()


def exit_as(status: int | None) -> None:
    """Exit with CMD's code, or die of the signal that ended CMD (no core dump: undumpable)."""
    if status is None:  # not reaped within the kill limit: something would not die
        os._exit(125)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's cannot be set (or needed)
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is not to end the process
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        print("Error: no command: python -S -m kforge_search.procs.keeper CMD...", file=sys.stderr)
        sys.exit(2)
    make_undumpable()
    stub = Stub()
    if not stub.start():
        exit_as(stub.relay())
    keeper = Keeper(argv[1:], stub.mask)
    keeper.start()
    keeper.wait()
    keeper.end_all()
    exit_as(keeper.status)


if __name__ == "__main__":
    main(sys.argv)
