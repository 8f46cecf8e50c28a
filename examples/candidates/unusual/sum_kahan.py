"""level1/08_sum_reduction on cpu-triton: compensated (Kahan) summation.

Technique: one program per (batch, block of columns) walks the reduced dimension one row at
a time and adds each row into a float32 running sum with Kahan's compensation: the rounding
error of every addition is kept in a second register and fed back into the next one, so the
result is as exact as a float64 sum rounded once. The output keeps the reduced dimension.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_N = 64


@triton.jit
def _kahan_sum_kernel(x_ptr, out_ptr, dim1, dim2, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < dim2
    total = tl.zeros((BLOCK_N,), dtype=tl.float32)
    carry = tl.zeros((BLOCK_N,), dtype=tl.float32)  # the low-order bits the sum lost so far
    for k in range(0, dim1):
        v = tl.load(x_ptr + (b * dim1 + k) * dim2 + cols, mask=mask, other=0.0)
        y = v - carry
        t = total + y
        carry = (t - total) - y
        total = t
    tl.store(out_ptr + b * dim2 + cols, total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the kernel reduces the middle dimension: move the reduced one there (a view)
        xm = x.movedim(self.reduce_dim, 1)
        lead = xm.shape[0]
        xc = xm.reshape(lead, xm.shape[1], -1).contiguous()
        batch, dim1, dim2 = xc.shape
        out = torch.empty((batch, 1, dim2), device=x.device, dtype=x.dtype)
        _kahan_sum_kernel[(batch, triton.cdiv(dim2, BLOCK_N))](xc, out, dim1, dim2, BLOCK_N=BLOCK_N)
        shape = list(xm.shape)
        shape[1] = 1
        return out.reshape(shape).movedim(1, self.reduce_dim)
