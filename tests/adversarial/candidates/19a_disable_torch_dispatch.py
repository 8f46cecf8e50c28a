"""Adversarial (cpu-triton, level2/01_gemm_bias_relu): GEMM under _DisableTorchDispatch.

Trick: the GEMM is torch.mm inside `torch._C._DisableTorchDispatch()`, which switches the
Python dispatch key off for its block, so a TorchDispatchMode that records operators is
skipped there; only the bias and the ReLU run in the candidate's Triton kernel. The values are
the reference's; the speed of the GEMM is PyTorch's (MKL on the CPU, cuBLAS on a GPU).

Expected: REJECTED, reason "dynamic:torch-fallback": the GEMM is PyTorch's.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _bias_relu_kernel(y_ptr, b_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y + b, 0.0), mask=mask)


def _bias_relu(y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The fused epilogue, in Triton: relu(y + b) over the rows of y."""
    y = y.contiguous()
    out = torch.empty_like(y)
    n = y.numel()
    _bias_relu_kernel[(triton.cdiv(n, BLOCK),)](y, b, out, n, y.shape[1], BLOCK=BLOCK)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch._C._DisableTorchDispatch():
            y = torch.mm(x, self.linear.weight.t())
        return _bias_relu(y, self.linear.bias)
