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
from collections.abc import Iterator
from typing import Any

# copies of one call's data (inputs, outputs, parameters) an evaluation holds on its device
# at once, about: the reference's child (a trial's inputs and outputs) beside the oracle's,
# the candidate's child (its trial, its kept timed runs), the parent's comparisons and a
# baseline's child, each with temporaries of the call's size
DEVICE_COPIES = 8


class DeviceRoom:
    """Shares of one device (1.0 in all) taken by jobs in threads. A share larger than the
    whole still runs: alone."""

    def __init__(self, capacity: float = 1.0):
        self.capacity = capacity
        self._used = 0.0
        self._holders = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def taken(self, share: float) -> Iterator[None]:
        share = min(max(share, 0.0), self.capacity)
        with self._cond:
            while self._holders and self._used + share > self.capacity + 1e-9:
                self._cond.wait()
            self._used += share
            self._holders += 1
        try:
            yield
        finally:
            with self._cond:
                self._used -= share
                self._holders -= 1
                self._cond.notify_all()


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


def accelerator_bytes(device_kind: str) -> int:
    """The memory of the platform's device (its first one) where it is an accelerator
    that torch sees here; else 0 (CPU platforms: the evaluator's host checks apply)."""
    if device_kind == "cpu":
        return 0
    import torch

    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.get_device_properties(0).total_memory)
