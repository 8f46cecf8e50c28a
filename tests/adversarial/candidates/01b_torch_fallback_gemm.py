"""Adversarial (cpu-triton, level2/01_gemm_bias_relu): PyTorch fallback through F.linear.

Trick: forward launches a token Triton kernel (it adds the bias onto a scratch row), so the
static check sees a kernel and a launch, and then does the GEMM, the bias and the ReLU with
torch.nn.functional.linear and torch.relu: the reference's own ops, so the values match it
and the time is eager PyTorch's.

Expected: REJECTED, reason "dynamic:torch-fallback".
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_row_kernel(b_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, tl.load(b_ptr + offs, mask=mask, other=0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.linear.bias.numel()
        scratch = torch.empty(n, device=x.device, dtype=x.dtype)
        _bias_row_kernel[(1,)](self.linear.bias, scratch, n, BLOCK=triton.next_power_of_2(n))
        return torch.relu(F.linear(x, self.linear.weight, self.linear.bias))
