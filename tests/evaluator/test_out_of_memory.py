"""A child out of device memory: its own doing, or other processes' (out_of_memory.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from kforge_search.evaluator import out_of_memory
from kforge_search.evaluator.candidate_drive import oracle_artifacts
from kforge_search.evaluator.oracle import OracleError
from kforge_search.evaluator.result import DEVICE_BUSY_REASON


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_without_an_initialized_device_nothing_is_blamed_on_others():
    exc = _raised(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB"))
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return  # the device's own state decides (the GPU tests' machine)
    assert out_of_memory.busy_reasons(exc) == []
    assert out_of_memory.busy_reasons(_raised(RuntimeError("other"))) == []


def test_the_failure_names_who_ran_out_and_what_status_follows():
    exc = _raised(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB\nmore"))
    candidate = out_of_memory.failure("candidate", exc)
    assert candidate["status"] == "RUNTIME_ERROR"
    assert candidate["message"].startswith("forward ran out of device memory: CUDA out of memory")
    assert "more" not in candidate["message"] and "Traceback" in candidate["traceback"]
    oracle = out_of_memory.failure("oracle", exc)
    assert oracle["status"] == "INFRA_ERROR" and "oracle" in oracle["message"]
    assert oracle["busy"] == bool(oracle["reasons"])


def test_an_oracle_that_ran_out_beside_others_marks_the_result_device_busy():
    assert oracle_artifacts(OracleError("x", busy=True)).reasons == (DEVICE_BUSY_REASON,)
    assert oracle_artifacts(OracleError("x")).reasons == ()


# what the CUDA caching allocator raised in a spare forked from a zygote that held NVML
# initialized (H200, two benches a GPU), in place of torch.OutOfMemoryError
NVML_ASSERT = (
    'NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at "/pytorch/'
    'c10/cuda/CUDACachingAllocator.cpp":1180, please report a bug to PyTorch.'
)


def test_the_allocators_nvml_assert_is_an_out_of_memory_and_other_errors_are_not():
    assert out_of_memory.device_oom(_raised(torch.OutOfMemoryError("CUDA out of memory")))
    assert out_of_memory.device_oom(_raised(RuntimeError(NVML_ASSERT)))
    assert not out_of_memory.device_oom(_raised(RuntimeError("INTERNAL ASSERT FAILED at x")))
    assert not out_of_memory.device_oom(_raised(ValueError(NVML_ASSERT)))
    failed = out_of_memory.failure("candidate", _raised(RuntimeError(NVML_ASSERT)))
    assert failed["message"].startswith("forward ran out of device memory")


class _EndedOracleChild:
    """An oracle's child that says its events, then has ended (killed as `killed`)."""

    def __init__(self, events: list[dict], killed: str, signal: str = "SIGKILL"):
        from kforge_search.evaluator.sandbox import ChildExit

        self._events = list(events)
        code = None if signal else 1
        self.exit = ChildExit(code, signal, killed, "oracle", "", 0, 41753.0)

    def next_event(self):
        return self._events.pop(0) if self._events else None

    def ask(self, line: str) -> None:
        pass

    def running(self) -> bool:
        return False


def _oracle_error(events: list[dict], killed: str, signal: str = "SIGKILL"):
    import pytest

    from kforge_search.evaluator.oracle import Oracle, OracleError

    oracle = Oracle(_EndedOracleChild(events, killed, signal), Path(tempfile.mkdtemp()))
    with pytest.raises(OracleError) as raised:
        oracle._answer("compared")
    return raised.value


def test_an_oracle_past_its_limit_after_its_work_went_to_a_crowded_hosts_is_device_busy():
    """H200, 39_L2Norm_ with 3 jobs a GPU: the oracle's 8 GiB trials went to the host (no
    room on the device) and it was killed after 124 s: INFRA_ERROR for both drafts. Where it
    said that others held the device, such an end is the device's state (the bench runs the
    problem again alone); where they did not, or it was not killed, the failure stays its."""
    crowded = {"type": "on-host", "why": "no room on the device", "crowded": True}
    alone = {"type": "on-host", "why": "no room on the device", "crowded": False}
    busy = _oracle_error([crowded], "timeout")
    assert busy.busy and "others held the device" in str(busy)
    assert not _oracle_error([alone], "timeout").busy
    assert not _oracle_error([], "timeout").busy
    # a SIGKILL no limit of ours sent, on a crowded host: the system's OOM killer (H200,
    # 38_L1Norm_ beside another job: "exit -9, SIGKILL, peak 25496 MB" after 213 s in verify)
    killed = _oracle_error([crowded], "")
    assert killed.busy and "others held the device" in str(killed)
    assert not _oracle_error([alone], "").busy  # the device was not crowded: its own failure
    assert not _oracle_error([crowded], "", "SIGSEGV").busy  # it crashed by itself
    assert not _oracle_error([crowded], "", "").busy  # it exited by itself
