"""Timed runs alone on their device, across evaluator processes.

Several evaluators can share a device: two platforms on one CPU host (cpu-cpp and cpu-triton),
`--workers 2` on one CPU node, or evaluator actors sharing a GPU. One candidate's build or
verification beside another's timed runs would slow the timed kernel and bend the ranking
the search selects on. So every evaluator takes this lock for its device: *shared* while
its child builds and verifies, *exclusive* while the child times. The reference child
(which times nothing) holds it shared; a baseline child compiles and warms up under a shared
hold and times each baseline under an exclusive one; an ncu child holds it exclusively
throughout. Work goes on side by side; timing waits until the device is quiet and keeps it
quiet.

It is a writer-preferring reader-writer lock on two files (flock). A writer holds the
"intent" file shared from the moment it waits until its timing ends; a reader takes the
intent exclusively (only while no writer waits or times) just to get its shared hold of the
device. So new work queues behind every waiting timing, a timing waits at most for the work
already running (bounded by the evaluator's own time limits), and the timings that wait
together run one after another before work resumes: a batch, not one timing per round of
work (H100, 8 actors: each candidate waited 6.5 s for the lane and 5 s more to get its
shared hold back, with the lane busy 7% of the time). The parent process holds it, never a
candidate's child; a process that dies releases its locks with its files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_DIR_ENV = "KFORGE_LOCK_DIR"  # where the lock files live (default: <tmp>/kforge-locks)
# a file: each hold as "holder mode start end [label] asked=T dev=KEY" (T: when it was asked for)
JOURNAL_ENV = "KFORGE_LOCK_JOURNAL"


def device_key(device: str) -> str:
    """The lock's name for a torch device string: the node's GPU behind it, or the host's
    CPUs. Every process that times on one GPU takes one lock, however it names the GPU: an
    evaluator actor sees its GPU as cuda:0 (Ray sets CUDA_VISIBLE_DEVICES per actor, e.g.
    "3"), a process that sees every GPU uses cuda:3; both are "cuda-3". One GPU named by index
    in one process and by UUID in another is two names (Ray and a plain shell use indices)."""
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return device.replace(":", "-")
    ordinal = int(index or 0)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:  # every GPU of the node, in its own order
        return f"cuda-{ordinal}"
    ids = [part.strip() for part in visible.split(",") if part.strip()]
    if ordinal >= len(ids):  # this process sees no such GPU: a name no GPU's lock has
        return f"cuda-unseen-{ordinal}"
    return "cuda-" + re.sub(r"[^A-Za-z0-9._-]", "_", ids[ordinal])


def lock_folder() -> Path:
    """Where the lock files are: $KFORGE_LOCK_DIR, else <tmp>/kforge-locks (an evaluator
    passes it to its children: a spare takes the lock too, standby.py)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "kforge-locks")


class DeviceLock:
    """One evaluator's hold on one device: `hold(exclusive)` waits and then holds it in that
    mode (releasing any other mode first); `release()` lets go."""

    def __init__(self, key: str, folder: Path | None = None):
        folder = folder or lock_folder()
        folder.mkdir(parents=True, exist_ok=True)
        self.key = key
        self._intent = os.open(folder / f"{key}.intent", os.O_RDWR | os.O_CREAT, 0o666)
        self._device = os.open(folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        self.mode = ""  # "", "shared" or "exclusive"
        self._since = 0.0
        self._asked = 0.0  # when the hold now held was asked for: its wait is _since - _asked
        self._waiting = False  # the intent held shared: a timing waits or runs
        # what the holder is doing, for the journal ("problem:mode"): a lane wait of minutes
        # then says whose hold it waited for
        self.label = ""

    def hold(self, exclusive: bool, queue: bool = True) -> None:
        """`queue`: behind any writer already waiting (writer-preferring); a shared hold
        without it waits only for a timing in progress, not for one that waits (a spare's
        warm-up: its evaluator holds the lock shared while it waits for the spare, and a
        waiting writer waits for that evaluator: queued, the three would wait forever)."""
        mode = "exclusive" if exclusive else "shared"
        if self.mode == mode:
            return
        asked = time.time()
        self.release()
        if not queue and not exclusive:
            fcntl.flock(self._device, fcntl.LOCK_SH)
            self.mode, self._since, self._asked = mode, time.time(), asked
            return
        if exclusive:  # new work waits from now until this timing ends; timings join
            fcntl.flock(self._intent, fcntl.LOCK_SH)
            self._waiting = True
            try:
                fcntl.flock(self._device, fcntl.LOCK_EX)
            except BaseException:
                self._let_intent_go()
                raise
        else:  # behind every writer waiting or timing
            fcntl.flock(self._intent, fcntl.LOCK_EX)
            try:
                fcntl.flock(self._device, fcntl.LOCK_SH)
            finally:
                fcntl.flock(self._intent, fcntl.LOCK_UN)
        self.mode, self._since, self._asked = mode, time.time(), asked

    def writer_waiting(self) -> bool:
        """Whether another process's timing waits for (or holds) this device: its intent
        file is held. A long shared hold asks this at its safe points and lets a waiting
        timing go first (yield_to_timing)."""
        try:
            fcntl.flock(self._intent, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._intent, fcntl.LOCK_UN)
        return False

    def yield_to_timing(self) -> bool:
        """At a safe point of a shared hold (between a baseline child's kinds, say): where a
        timing waits, let go and queue behind it, then hold shared again; True if it did.
        Without it a timing waited for the whole of every shared hold running when it
        asked: a baseline child compiling four kinds under contention held the lock for
        minutes (H200, level 1 at published sizes, 8 jobs: 160 s of lane wait per first
        evaluation)."""
        if self.mode != "shared" or not self.writer_waiting():
            return False
        self.release()
        self.hold(exclusive=False)
        return True

    def step_aside(self) -> None:
        """Let a shared hold go for work that leaves the device alone (a baseline child's
        torch.compile, its comparisons on the CPU: minutes under load); `resume_work` takes
        it back. An exclusive hold is kept: the timed runs stay alone. A baseline's shared
        hold kept every timing of its GPU waiting (H200, level 1 at published sizes:
        3_Batched's held it 120-153 s, 94_MSELoss's next candidate waited 131 s)."""
        if self.mode == "shared":
            self.release()

    def resume_work(self) -> bool:
        """At a safe point: hold shared again after `step_aside` (behind any timing that
        waits), else let a waiting timing go first (yield_to_timing); True if it waited."""
        if not self.mode:
            self.hold(exclusive=False)
            return True
        return self.yield_to_timing()

    def _let_intent_go(self) -> None:
        if self._waiting:
            fcntl.flock(self._intent, fcntl.LOCK_UN)
            self._waiting = False

    def release(self) -> None:
        if not self.mode:
            return
        end = time.time()  # before letting go: the journal's holds never seem to overlap
        fcntl.flock(self._device, fcntl.LOCK_UN)
        self._let_intent_go()
        if journal := os.environ.get(JOURNAL_ENV):
            holder = f"{os.getpid()}:{id(self)}"
            label = "".join(self.label.split())  # one field: no whitespace
            line = f"{holder} {self.mode} {self._since:.6f} {end:.6f} {label}".rstrip()
            with open(journal, "a") as f:  # and when it was asked for, on which device
                f.write(f"{line} asked={self._asked:.6f} dev={self.key}\n")
        self.mode = ""

    def close(self) -> None:
        self.release()
        os.close(self._intent)
        os.close(self._device)


@contextlib.contextmanager
def holding(device: str, exclusive: bool, queue: bool = True) -> Iterator[DeviceLock]:
    """This process's own hold on a torch device's lock, for work done in-process (the
    bench's screening times genomes here, not in an evaluator's child). Not inside an
    evaluation of this process: its evaluator holds the same lock through another file."""
    lock = DeviceLock(device_key(device))
    try:
        lock.hold(exclusive, queue)
        yield lock
    finally:
        lock.close()


@contextlib.contextmanager
def one_at_a_time(device: str, what: str, folder: Path | None = None) -> Iterator[None]:
    """One process at a time of this node's processes doing `what` on this device (a spare's
    CUDA context: "context"), before it takes the device lock: a file lock of its own, held
    exclusively. The driver creates contexts one at a time anyway (H200: ~5 a second
    however many processes asked), so spares asking together each held the device shared
    for all of theirs: 0.97 s a hold at the median, 142.8 s of holds in a 138 s throughput
    run, and a timing waited for the whole batch while new work queued behind it. One at a
    time, a timing that waits goes between two spares' contexts (their shared holds queue
    behind it). It is taken holding nothing of the device lock, and nothing that holds the
    device lock waits for it: no cycle. Measured on an H200 (`bench --throughput`): at first
    the spares' holds went 140 -> 74.5 s and nothing else moved (call 37 of
    docs/results/h200-2026-11-29); once candidates' steps were shorter, 63.0 -> 69.1
    evaluations a GPU-minute (call 42 of docs/results/h200-2026-11-29c). standby.py takes it
    unless $KFORGE_SPARE_CONTEXTS=together (standby.contexts_one_at_a_time)."""
    folder = folder or lock_folder()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{device_key(device)}.{what}", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (the flock goes with the file's last descriptor)
