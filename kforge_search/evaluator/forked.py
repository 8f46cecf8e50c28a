"""The evaluator's handle on a child a zygote forked (evaluator/zygote.py): what
subprocess.Popen gives for a child of its own (pid, stdin, stdout, poll, wait, returncode),
for a process that is not its child. The exit status comes on a pipe from the zygote, which
reaps it; a pipe closed without one (the zygote gone) reads as killed."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from typing import IO


class ForkedProc:
    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], status_fd: int):
        self.pid = pid  # the child's keeper, a session leader (its process group's id)
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._status_fd = status_fd

    def poll(self) -> int | None:
        if self.returncode is None and self._readable(0):
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._readable(timeout):
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _readable(self, timeout: float | None) -> bool:
        return bool(select.select([self._status_fd], [], [], timeout)[0])

    def _read_status(self) -> None:
        data = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self._status_fd, 64):
                data += chunk
                if data.endswith(b"\n"):
                    break
        with contextlib.suppress(OSError):
            os.close(self._status_fd)
        try:
            self.returncode = int(data)
        except ValueError:  # no status: the zygote went (and its children with it)
            self.returncode = -signal.SIGKILL
