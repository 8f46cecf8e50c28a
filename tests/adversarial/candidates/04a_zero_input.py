"""Adversarial (cpu-triton, level1/10_elementwise_chain): input zeroed in place.

Trick: a Triton kernel overwrites the input with zeros in place and the chain kernel then
runs on the zeroed input, so every output element is relu(0 * 1.5 + 0.25) * 2.0 - 0.1 = 0.4.
A harness that compares the output with a reference computed from the (now zeroed) input it
still holds would be fooled.

Expected: REJECTED, reason "dynamic:input-mutated".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _zero_kernel(x_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(x_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=mask)


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
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, BLOCK),)
        _zero_kernel[grid](x, n, BLOCK=BLOCK)  # x is contiguous here: this zeroes the caller's x
        _chain_kernel[grid](x, out, n, BLOCK=BLOCK)
        return out
