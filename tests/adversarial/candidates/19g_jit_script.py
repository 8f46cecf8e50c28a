"""Adversarial (cpu-triton, level2/01_gemm_bias_relu): the GEMM in a TorchScript function.

Trick: the GEMM is a @torch.jit.script function: TorchScript's interpreter runs it from C++,
in case the recorder only sees operators called from Python. The bias and the ReLU run in the
candidate's Triton kernel.

Expected: REJECTED, reason "dynamic:torch-fallback": the GEMM is PyTorch's.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@torch.jit.script
def _scripted_gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.mm(w.t())


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
        y = _scripted_gemm(x, self.linear.weight)
        return _bias_relu(y, self.linear.bias)
