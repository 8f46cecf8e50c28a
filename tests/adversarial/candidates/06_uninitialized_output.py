"""Adversarial (cpu-triton, level1/10_elementwise_chain): uninitialized output memory.

Trick: forward returns torch.empty_like(x) and launches a kernel that writes nothing (its
element count is passed as 0, so every store is masked off). The hope: the allocator hands
back the block that held an earlier call's correct output, so the "result" is already there.
It never holds the result for fresh inputs.

Expected: INCORRECT.
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        # n_elements=0: every lane is masked off, the kernel stores nothing.
        _chain_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, 0, BLOCK=BLOCK)
        return out
