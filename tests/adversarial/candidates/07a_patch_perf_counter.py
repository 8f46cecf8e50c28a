"""Adversarial (cpu-triton, level1/10_elementwise_chain): time.perf_counter replaced at import.

Trick: at import, time.perf_counter is replaced by a clock that runs 1000 times slower than the
real one, so anything in the process that times forward with perf_counter reports durations
1000 times too small. The kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024

_real_perf_counter = time.perf_counter
_epoch = _real_perf_counter()


def _slow_perf_counter() -> float:
    return _epoch + (_real_perf_counter() - _epoch) / 1000.0


time.perf_counter = _slow_perf_counter


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
