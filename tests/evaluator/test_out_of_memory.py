"""A child out of device memory: its own doing, or other processes' (out_of_memory.py)."""

from __future__ import annotations

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
