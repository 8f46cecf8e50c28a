"""`kforge bench --jobs N`: problems side by side, each with its own evaluator, one agent
shared one call at a time, and the device's memory shared by shares (search/device_room.py).
Timed runs still hold the device alone (evaluator/devicelock.py)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import queue
import threading
from typing import Any


class OneAtATime:
    """The agent behind a lock: jobs in threads share it, and torch.fx's tracing patches
    module-level state while it runs."""

    def __init__(self, agent: Any):
        self._agent, self._lock = agent, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._agent, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call

    def alone(self, fn: Any, *args: Any) -> Any:
        """`fn(*args)` while no agent call runs (the problem's program on the meta device)."""
        with self._lock:
            return fn(*args)


def device_shares(platform: Any, agent: OneAtATime) -> Any:
    """problem -> the share of its device one evaluation holds (search/device_room.py)."""
    from kforge_search.problem import exec_problem
    from kforge_search.search.device_room import accelerator_bytes, device_share

    total = accelerator_bytes(platform.device_kind)

    def share(problem: Any) -> float:
        if not total:
            return 0.0
        try:
            return agent.alone(lambda: device_share(exec_problem(problem), total))
        except Exception:  # the reference's child says why the program does not run
            return 0.0

    return share


# drafts of one problem evaluated side by side at most (its own evaluator and idle ones
# lent to it): the agent proposes that many at once (bench.py's BuiltinAgent)
SIDE_BY_SIDE = 4


class Lender:
    """The idle evaluators of a bench's jobs, lent to a problem's search for its drafts side
    by side once every problem has started (a problem that waits for a job comes first):
    the last problems of a bench at budget 16 ran their drafts one after another while the
    other jobs had nothing left to do (H200, 14 level-2 problems, 8 jobs: 90-272 s each,
    and the bench took as long as the slowest). A lent evaluator takes the problem's share of
    the device (device_room.py) while it has it, and its oracles end when it comes back."""

    def __init__(self, idle: queue.SimpleQueue[Any], room: Any, waiting: Any):
        self._idle, self._room, self._waiting = idle, room, waiting

    def borrow(self, most: int, share: float) -> list[Any]:
        lent: list[Any] = []
        while len(lent) < most and not self._waiting():
            if not self._room.take_if_room(share):
                break
            try:
                lent.append(self._idle.get_nowait())
            except queue.Empty:
                self._room.give(share)
                break
        return lent

    def give_back(self, lent: list[Any], share: float) -> None:
        for evaluator in lent:
            evaluator.close_oracles()  # the problem's reference leaves the device with it
            self._room.give(share)
            self._idle.put(evaluator)


@dataclasses.dataclass(frozen=True)
class Lent:
    """What one problem may borrow from a Lender (search/suite_bench.search_problem)."""

    lender: Lender
    share: float
    most: int = SIDE_BY_SIDE - 1

    def borrow(self, wanted: int) -> list[Any]:
        return self.lender.borrow(min(wanted, self.most), self.share)

    def give_back(self, lent: list[Any]) -> None:
        self.lender.give_back(lent, self.share)


def in_parallel(
    problems: list[Any],
    run: Any,
    first: Any,
    jobs: int,
    finished: Any,
    share: Any,
    free: Any = None,
) -> None:
    """Problems in `jobs` threads, each with its own evaluator (the first one given). Each
    evaluator's children build and verify side by side; its timed runs hold the device alone
    (evaluator/devicelock.py), so the figures are those of a run alone. A problem starts
    once the device has room for it: `share(problem)` of its memory, and that much free
    (`free()`, where given: device_room.py). The problems go smallest share first: a large
    one waits for room with its thread and its evaluator, and level 1's 14 problems of 4096
    x 393216 come one after another in the suite's order (H200, shares of 0.73 each: every
    thread waited on one, and a shard that had finished six problems in 94 s finished none
    in the next 380 s); a run cut short keeps the most rows. A problem whose reference
    lacked device memory that the others held (DEVICE_BUSY: H200, level 1, 4 to 8 GiB
    problems refused with 1-5 GiB of 140 free) runs again, alone on the device."""
    from kforge_search.evaluator import Evaluator
    from kforge_search.search.device_room import DeviceRoom
    from kforge_search.search.suite_bench import DEVICE_BUSY

    room = DeviceRoom(free=free)
    shares = {id(p): share(p) for p in problems}
    problems = sorted(problems, key=lambda p: shares[id(p)])

    idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
    evaluators = [first] + [Evaluator(first.config) for _ in range(jobs - 1)]
    for evaluator in evaluators:
        idle.put(evaluator)
    lock = threading.Lock()
    stopped = threading.Event()  # Ctrl-C: no row after it (see below)
    # problems not started yet (waiting for an evaluator, or for room on the device): while
    # there is one, nothing is lent
    unstarted = [len(problems)]
    lender = Lender(idle, room, lambda: unstarted[0] > 0)

    def one(problem: Any) -> None:
        evaluator = idle.get()
        share = shares[id(problem)]
        try:
            with room.taken(share):
                with lock:
                    unstarted[0] -= 1
                row, parents = run(problem, evaluator, Lent(lender, share))
            if row.status == DEVICE_BUSY and not stopped.is_set():  # others held the device:
                with room.taken(room.capacity):  # again, alone on it
                    row, parents = run(problem, evaluator)
        finally:
            idle.put(evaluator)
        with lock:
            if not stopped.is_set():
                finished(row, parents)

    pool = concurrent.futures.ThreadPoolExecutor(jobs, thread_name_prefix="bench")
    interrupted = False
    try:
        for future in [pool.submit(one, p) for p in problems]:
            future.result()
    except KeyboardInterrupt:  # no waiting for the problems in flight (minutes each)
        interrupted = True
        # the problems in flight end as their evaluators' children are closed below; the
        # rows that says are no verdict (H200: 24_LogSoftmax's reference "died with SIGKILL",
        # kept as REFERENCE_FAILED, and --resume skipped it): dropped, --resume runs them
        with lock:
            stopped.set()
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=interrupted)
        for evaluator in evaluators[1:]:
            evaluator.close()
