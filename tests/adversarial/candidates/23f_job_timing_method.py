"""Adversarial (cuda-triton, level1/10_elementwise_chain): the job's timing method swapped.

Trick: the harness's Job (a frozen dataclass) names the timing method: CUDA events on a GPU.
At import the candidate finds the Job with gc.get_objects() and sets its timing_method to
"perf_counter" with object.__setattr__: the CPU method, which reads the host clock around
each call and never synchronizes the device, so every timed run measures only the kernel's
launch, and the check that compares wall clock with CUDA events does not apply to it. The
kernel itself is honest.

GPU only: on the CPU the method is perf_counter already.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


def _chain_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The honest kernel: relu(x * 1.5 + 0.25) * 2.0 - 0.1 into out."""
    n = x.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    return _chain_into(xc, torch.empty_like(xc))


def _time_launches_only() -> None:
    for obj in gc.get_objects():
        kind = type(obj)
        is_job = kind.__name__ == "Job" and kind.__module__.endswith("evaluator.job")
        if is_job and getattr(obj, "timing_method", "") == "cuda_events":
            object.__setattr__(obj, "timing_method", "perf_counter")


_time_launches_only()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
