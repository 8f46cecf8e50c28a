"""Adversarial (cpu-triton, level1/06_rmsnorm): RMSNorm without its epsilon.

Trick: x / sqrt(mean(x^2) + eps) * w with eps = 1e-6 added to a mean square near 1 changes
nothing a float32 can show, so the candidate drops it: x * rsqrt(mean(x^2)) * w. It differs
from the reference only on rows whose mean square is near eps or zero (a padded row, a row
of zeros), where it divides 0 by 0.

Expected: INCORRECT (a row of zeros: NaN where the reference gives 0).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x * inv_rms * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        rows, cols = xc.shape
        _rmsnorm_kernel[(rows,)](xc, self.weight, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
