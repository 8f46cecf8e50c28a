"""Adversarial (cpu-triton, level1/10_elementwise_chain): PyTorch fallback.

Trick: forward launches a token Triton kernel (it copies a few elements into a scratch
buffer nobody reads), so the static check sees a kernel and a launch, and then computes the
real answer with PyTorch ops: torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1. The values are exactly
the reference's, and the "speed" is eager PyTorch's.

Expected: REJECTED, reason "dynamic:torch-fallback".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TOKEN = 64


@triton.jit
def _token_kernel(x_ptr, scratch_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(scratch_ptr + offs, tl.load(x_ptr + offs))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        if xc.numel() >= TOKEN:
            scratch = torch.empty(TOKEN, device=x.device, dtype=x.dtype)
            _token_kernel[(1,)](xc, scratch, BLOCK=TOKEN)
        return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1
