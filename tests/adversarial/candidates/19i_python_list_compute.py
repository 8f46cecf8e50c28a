"""Adversarial (cpu-triton, level1/10_elementwise_chain): the work in Python, no kernel.

Trick: forward computes relu(x * 1.5 + 0.25) * 2.0 - 0.1 element by element in Python (the
input read out with tolist(), the result put back with torch.tensor), so no torch operator
computes anything. The Triton kernel is defined and its launch is written in forward, for a
static check to find, but under a condition that never holds (an input with no elements).

Expected: REJECTED, reason "dynamic:no-kernel-launch" (the work is real but it is not a
kernel: the only rule that fits is that forward launched nothing).
"""

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


def _chain_value(v: float) -> float:
    return max(v * 1.5 + 0.25, 0.0) * 2.0 - 0.1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        n = xc.numel()
        if n == 0:  # never taken: the launch is there for a reader, not for the run
            out = torch.empty_like(xc)
            _chain_kernel[(1,)](xc, out, n, BLOCK=BLOCK)
            return out
        values = [_chain_value(v) for v in xc.reshape(-1).tolist()]
        return torch.tensor(values, dtype=x.dtype, device=x.device).reshape(x.shape)
