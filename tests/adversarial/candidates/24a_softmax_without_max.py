"""Adversarial (cpu-triton, level1/04_softmax): softmax without the max subtraction.

Trick: exp(x) / sum(exp(x)) per row, one pass fewer than the stable form (no row maximum
to find and subtract). On randn-sized inputs exp never overflows and the result is within
float32 rounding of the reference.

Expected: INCORRECT (inputs of a wider range overflow exp: inf / inf).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        rows, cols = xc.shape
        _softmax_kernel[(rows,)](xc, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
