"""A bench's jobs share the device's memory: a problem starts once its share fits beside
the others' (search/device_room.py)."""

from __future__ import annotations

import threading
import time
import types

import torch

from kforge_search.search import device_room
from kforge_search.search.device_room import DEVICE_COPIES, DeviceRoom, device_share


def _enter(room: DeviceRoom, share: float, log: list[str], name: str, hold: float):
    def run() -> None:
        with room.taken(share):
            log.append(f"+{name}")
            time.sleep(hold)
            log.append(f"-{name}")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_large_problems_wait_for_room_and_small_ones_go_beside_them():
    room, log = DeviceRoom(), []
    big = _enter(room, 0.7, log, "big", 0.4)
    time.sleep(0.1)
    second = _enter(room, 0.7, log, "second", 0.1)
    small = _enter(room, 0.2, log, "small", 0.05)
    for thread in (big, second, small):
        thread.join(5)
    assert log.index("+small") < log.index("-big")  # beside the big one
    assert log.index("+second") > log.index("-big")  # not beside it: 1.4 of the device
    assert len(log) == 6


def test_a_problem_larger_than_the_device_still_runs_alone():
    room, log = DeviceRoom(), []
    huge = _enter(room, 3.0, log, "huge", 0.2)
    time.sleep(0.05)
    other = _enter(room, 0.1, log, "other", 0.0)
    for thread in (huge, other):
        thread.join(5)
    assert log == ["+huge", "-huge", "+other", "-other"]


def _program(n: int, k: int) -> types.ModuleType:
    module = types.ModuleType("program")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(k, k))

        def forward(self, x):
            return x @ self.w

    module.Model = Model
    module.get_inputs = lambda: [torch.randn(n, k)]
    module.get_init_inputs = lambda: []
    return module


def test_the_share_is_one_calls_data_times_the_copies_an_evaluation_holds():
    # measured on the meta device: a 2**20 x 1024 input would be 4 GiB, nothing is made
    one_call = 4 * (2**20 * 1024 * 2 + 1024 * 1024)
    share = device_share(_program(2**20, 1024), 80 * 2**30)
    assert share == DEVICE_COPIES * one_call / (80 * 2**30)
    assert device_share(_program(2**20, 1024), 0) == 0.0  # no device: no share
    broken = _program(4, 4)
    broken.get_inputs = lambda: 1 / 0
    assert device_share(broken, 80 * 2**30) == 0.0  # the reference's child says why


def test_a_job_also_waits_for_the_memory_others_hold_to_be_free(monkeypatch):
    """Shares are estimates: a job whose share fits beside the others' still waits while
    the device's measured free memory is less than its share (other processes hold it), and
    goes once it is free; alone, it goes whatever is free."""
    monkeypatch.setattr(device_room, "FREE_POLL_S", 0.05)
    free = {"share": 0.05}
    room, log = DeviceRoom(free=lambda: free["share"]), []
    first = _enter(room, 0.1, log, "first", 0.6)
    time.sleep(0.1)
    second = _enter(room, 0.1, log, "second", 0.0)
    time.sleep(0.2)
    assert "+second" not in log  # 0.2 of 1.0 in shares, but 0.05 free
    free["share"] = 0.5
    second.join(5)
    first.join(5)
    assert log.index("+second") < log.index("-first")  # went beside it once free
    lonely = DeviceRoom(free=lambda: 0.0)
    with lonely.taken(0.3):  # no one else: it goes
        pass
