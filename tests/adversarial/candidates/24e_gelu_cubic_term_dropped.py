"""Adversarial (cpu-triton, level1/07_gelu, policy "loose"): GELU without its cubic term.

Trick: the tanh approximation of GELU is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
The cubic term is small where most randn inputs lie (|x| < 1: under 0.045), so the candidate
drops it: 0.5 x (1 + tanh(sqrt(2/pi) x)), two multiplications fewer per element. On randn
inputs the error stays near the loose tolerance.

Expected: INCORRECT (inputs of another range, where x^3 is not small).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
SQRT_2_OVER_PI = 0.7978845608028654


@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    z = SQRT_2_OVER_PI * x
    tanh = 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tanh), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _gelu_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
