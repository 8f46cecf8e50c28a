"""Room on the device for jobs side by side: each problem takes the share of its device's
memory that its evaluation may hold, and waits while the others' shares leave too little.

A bench with --jobs 8 of KernelBench's level 1 at published sizes (H200, 140 GiB) started
eight problems whose one call holds 12 GiB (a 4096 x 393216 float32 input and output) at
once: the references of six failed for device memory, and two comparisons ran out of it
(BENCH_ERROR); none was the problem's fault. With shares the large problems run one or two
at a time, and the small ones (a 4096 x 4096 matmul takes 0.2 GiB) beside them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

# copies of one call's data (inputs, outputs, parameters) an evaluation holds on its device
# at once, about: the reference's child (a trial's inputs and outputs) beside the oracle's,
# the candidate's child (its trial, its kept timed runs), the parent's comparisons and a
# baseline's child, each with temporaries of the call's size
DEVICE_COPIES = 8


# how often a job that waits for the device's free memory looks again (seconds)
FREE_POLL_S = 1.0


class DeviceRoom:
    """Shares of one device (1.0 in all) taken by jobs in threads. A share larger than the
    whole still runs: alone. With `free` (the device's free memory as a share of its
    total, measured), a job also waits until that much is free: the shares are estimates,
    and the jobs' processes held more (H200, level 1 at published sizes with 6 jobs: 11 to
    19 processes held 134-139 of 140 GiB, and references of 4-8 GiB were refused)."""

    def __init__(self, capacity: float = 1.0, free: Callable[[], float] | None = None):
        self.capacity = capacity
        self._free = free
        self._used = 0.0
        self._holders = 0
        self._cond = threading.Condition()

    def _no_room(self, share: float) -> bool:
        if not self._holders:
            return False
        if self._used + share > self.capacity + 1e-9:
            return True
        return self._free is not None and self._free() < share

    def take_if_room(self, share: float) -> bool:
        """`share` taken at once where there is room for it, without waiting (give it back
        with `give`); False where there is none, or no other holder (a job alone does not
        lend it room: the job itself holds a share)."""
        share = self._clamped(share)
        with self._cond:
            if not self._holders or self._no_room(share):
                return False
            self._take(share)
            return True

    def give(self, share: float) -> None:
        share = self._clamped(share)
        with self._cond:
            self._used -= share
            self._holders -= 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def taken(self, share: float) -> Iterator[None]:
        share = self._clamped(share)
        with self._cond:
            while self._no_room(share):
                self._cond.wait(FREE_POLL_S if self._free is not None else None)
            self._take(share)
        try:
            yield
        finally:
            self.give(share)

    def _clamped(self, share: float) -> float:
        return min(max(share, 0.0), self.capacity)

    def _take(self, share: float) -> None:  # under self._cond
        self._used += share
        self._holders += 1


def device_share(module: Any, device_bytes: int) -> float:
    """The share of a device of `device_bytes` that one evaluation of the problem whose
    program is `module` (problem.exec_problem) holds: DEVICE_COPIES of one call's data,
    measured on the meta device (footprint.measure). 0 where it cannot be measured (the
    reference's child then says why the problem cannot run) or without a device."""
    from kforge_search.evaluator import footprint

    if device_bytes <= 0:
        return 0.0
    fp = footprint.measure(module)
    if isinstance(fp, str):
        return 0.0
    return DEVICE_COPIES * (fp.inputs + fp.outputs + fp.params) / device_bytes


def free_share(device_kind: str) -> Callable[[], float] | None:
    """The platform's device's free memory as a share of its total, measured on each call
    (every process's use counts); None without an accelerator."""
    if not accelerator_bytes(device_kind):
        return None
    import torch

    def free() -> float:
        available, total = torch.cuda.mem_get_info()
        return available / total

    return free


def accelerator_bytes(device_kind: str) -> int:
    """The memory of the platform's device (its first one) where it is an accelerator
    that torch sees here; else 0 (CPU platforms: the evaluator's host checks apply)."""
    if device_kind == "cpu":
        return 0
    import torch

    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.get_device_properties(0).total_memory)
