"""A child that ran out of device memory: its own doing, or other processes' (a bench's other
jobs, their oracles)? Said with the failure, so that a bench evaluates the problem again
alone (cli/bench_jobs.py) rather than count a crowded device against it (H200, level 1 at
published sizes: 4 to 8 GiB allocations failed with 1.6 of 140 GiB free)."""

from __future__ import annotations

import traceback
from typing import Any

from kforge_search.evaluator.result import DEVICE_BUSY_REASON

# the CUDA caching allocator's assert where NVML does not initialize in the process: raised in
# place of torch.OutOfMemoryError, whose message (the processes on the device, by NVML) it was
# building. H200x4, two benches a GPU: every device OOM of some children came back so (a
# candidate's RUNTIME_ERROR, references' INFRA_ERROR), "Can't initialize NVML" in their
# output. Why NVML failed there is not known: a plain fork of a process that checked CUDA by
# NVML, as the zygote does, got torch.OutOfMemoryError on the same machine.
NVML_ASSERT = ("NVML_SUCCESS == DriverAPI::get()->nvml", "INTERNAL ASSERT FAILED")


def device_oom(exc: BaseException) -> bool:
    """Whether `exc` is an allocation on the device that failed: torch.OutOfMemoryError, or
    the RuntimeError the allocator raises instead where NVML does not initialize."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and all(mark in str(exc) for mark in NVML_ASSERT)


def crowded_device() -> bool:
    """Whether other processes hold a quarter of this process's device or more."""
    import torch

    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved() >= total // 4


def busy_reasons(exc: BaseException) -> list[str]:
    """[DEVICE_BUSY_REASON] where `exc` is the device running out of memory while other
    processes hold a quarter of it or more, else []."""
    import torch

    if not device_oom(exc) or not torch.cuda.is_initialized():
        return []
    return [DEVICE_BUSY_REASON] if crowded_device() else []


def failure(mode: str, exc: BaseException) -> dict[str, Any]:
    """The `fail` event's fields for an out-of-memory that escaped a child's own handlers: a
    candidate's RUNTIME_ERROR, an oracle's INFRA_ERROR (the reference's stage says its own:
    reference_child.run_reference)."""
    import torch

    torch.cuda.empty_cache()
    reasons = busy_reasons(exc)
    who = "forward" if mode == "candidate" else "the oracle's reference"
    return {
        "status": "RUNTIME_ERROR" if mode == "candidate" else "INFRA_ERROR",
        "message": f"{who} ran out of device memory: {str(exc).splitlines()[0][:300]}",
        "reasons": reasons,
        "busy": bool(reasons),
        "traceback": "".join(traceback.format_exception(exc)),
    }
