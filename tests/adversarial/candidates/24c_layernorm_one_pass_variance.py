"""Adversarial (cpu-triton, level1/05_layernorm): variance as E[x^2] - E[x]^2.

Trick: the mean and the variance from one pass over the row, sum(x) and sum(x * x), with the
variance E[x^2] - E[x]^2 in float32 (the textbook formula; the stable one subtracts the mean
first, a second pass). With zero-mean inputs the two agree; where the row's mean is large
against its spread, E[x^2] and E[x]^2 are nearly equal and their difference is all rounding
(catastrophic cancellation: the variance can even come out negative).

Expected: INCORRECT (rows whose mean is large against their spread).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    var = mean_sq - mean * mean
    y = (x - mean) / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, y * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        cols = xc.shape[-1]
        rows = xc.numel() // cols
        _layernorm_kernel[(rows,)](
            xc, self.norm.weight, self.norm.bias, out, cols, self.norm.eps,
            BLOCK=triton.next_power_of_2(cols),
        )  # fmt: skip
        return out
