"""Adversarial (cpu-triton, level1/10_elementwise_chain): a kernel that is never launched.

Trick: a real @triton.jit kernel is defined and a launch expression sits in a branch that can
never run (a tensor's element count is never negative), so a static check finds both a
kernel and a launch. forward actually computes with NumPy on the CPU (x.numpy(), NumPy
arithmetic, torch.from_numpy) and calls no torch compute op, so a torch-op check finds
nothing either. The values are right.

Expected: REJECTED, reason "dynamic:no-kernel-launch".
"""

import numpy as np
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
        n = x.numel()
        if n < 0:  # never true: the launch exists only for the static check
            out = torch.empty_like(x)
            _chain_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
            return out
        a = x.detach().numpy()
        y = np.maximum(a * np.float32(1.5) + np.float32(0.25), np.float32(0.0))
        y = y * np.float32(2.0) - np.float32(0.1)
        return torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
