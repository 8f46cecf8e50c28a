"""Adversarial (cpu-triton, level1/10_elementwise_chain): try/except fallback to PyTorch.

Trick: forward "tries" a fused Triton kernel but launches it with an argument missing, so
Triton raises at every launch; the `except` quietly computes the reference math with PyTorch
ops. An agent that sees OK never learns its kernel does not run.

Expected: REJECTED, reason "dynamic:torch-fallback".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
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
        try:
            # n_elements is missing: Triton raises before anything runs.
            _chain_kernel[(triton.cdiv(xc.numel(), BLOCK),)](xc, out, BLOCK=BLOCK)
        except Exception:
            return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1
        return out
