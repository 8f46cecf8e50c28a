"""Adversarial (cpu-triton, level1/08_sum_reduction): an fp16 accumulator passed off as fp32.

Trick: the inputs are read as float32 but converted to float16 and summed in a float16
accumulator (half the register and bandwidth cost on a GPU); the result is stored as
float32, so the output's dtype is the reference's.

Expected: INCORRECT (float16's 11-bit mantissa: errors far above the strict tolerance).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim1_kernel(x_ptr, out_ptr, dim1, dim2, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < dim2
    acc = tl.zeros((BLOCK_N,), dtype=tl.float16)
    for k in range(0, dim1):
        v = tl.load(x_ptr + (b * dim1 + k) * dim2 + cols, mask=mask, other=0.0)
        acc += v.to(tl.float16)
    tl.store(out_ptr + b * dim2 + cols, acc.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        batch, dim1, dim2 = xc.shape
        out = torch.empty((batch, 1, dim2), device=x.device, dtype=x.dtype)
        block = min(triton.next_power_of_2(dim2), 256)
        _sum_dim1_kernel[(batch, triton.cdiv(dim2, block))](xc, out, dim1, dim2, BLOCK_N=block)
        return out
