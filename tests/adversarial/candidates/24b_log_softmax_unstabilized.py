"""Adversarial (cpu-triton, level1/13_log_softmax): log-sum-exp without stabilization.

Trick: x - log(sum(exp(x))) per row, without the row maximum (the stable form is
x - m - log(sum(exp(x - m)))): one reduction fewer. On randn-sized inputs nothing overflows.

Expected: INCORRECT (inputs of a wider range overflow exp: the sum is inf, every output -inf).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _log_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf"))
    lse = tl.log(tl.sum(tl.exp(x), axis=0))
    tl.store(out_ptr + row * n_cols + cols, x - lse, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        rows, cols = xc.shape
        _log_softmax_kernel[(rows,)](xc, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
