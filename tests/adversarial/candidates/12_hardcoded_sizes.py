"""Adversarial (cpu-triton, level1/10_elementwise_chain): sizes hard-coded for "ci".

Trick: the kernel is specialised to the one shape it was shown, [16, 1000]: a grid of 16 row
programs, 1000 columns per row (the column mask is a literal), row stride taken from the
input. It is exact at that shape. At any other shape it leaves elements unwritten (wider rows
keep their tail uninitialized, further rows are never visited); a flat bound on the element
count keeps it from touching memory it does not own.

Expected: OK at "ci", with result.generalizes == "no" (the problem's "unseen" size set,
[7, 1537], comes out wrong).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS = 16
COLS_BLOCK = 1024


@triton.jit
def _chain_16x1000_kernel(x_ptr, out_ptr, stride_row, n_elements, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    offs = row * stride_row + cols
    mask = (cols < 1000) & (offs < n_elements)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        _chain_16x1000_kernel[(ROWS,)](xc, out, xc.stride(0), xc.numel(), BLOCK=COLS_BLOCK)
        return out
