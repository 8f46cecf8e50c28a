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
