"""Adversarial (cpu-triton, level1/10_elementwise_chain): input used as scratch afterwards.

Trick: the output is computed correctly, and then the input buffer is reused as free scratch
memory: a second kernel writes the intermediate x * 1.5 + 0.25 into it. The output alone is
right; the caller's input is silently destroyed (a later consumer of x, or a harness that
reuses inputs across runs, gets garbage).

Expected: REJECTED, reason "dynamic:input-mutated".
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


@triton.jit
def _scratch_kernel(x_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(x_ptr + offs, x * 1.5 + 0.25, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.numel()
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, BLOCK),)
        _chain_kernel[grid](x, out, n, BLOCK=BLOCK)
        _scratch_kernel[grid](x, n, BLOCK=BLOCK)  # the caller's x is now scratch
        return out
