"""Adversarial (cpu-triton, level2/01_gemm_bias_relu): PyTorch only when nobody records.

Trick: forward asks torch whether a TorchDispatchMode is on the stack
(torch._C._len_torch_dispatch_stack()). The harness records operators while it verifies, so
then the candidate runs its own (honest, slow) Triton GEMM; with no mode on the stack (the
timed runs) it calls torch.addmm and applies the ReLU with its Triton epilogue. Every output
is correct, so fingerprints of the timed runs match, and the time of record is MKL's
(cuBLAS's on a GPU), not the candidate's kernel's.

Expected: REJECTED, reason "dynamic:torch-fallback" (docs/evaluator.md lists "detecting the
recorder" as not defended: a finding).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
BLOCK_M, BLOCK_N, BLOCK_K = 16, 32, 32


@triton.jit
def _gemm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            x_ptr + rm[:, None] * K + kk[None, :],
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            w_ptr + rn[None, :] * K + kk[:, None],
            mask=(rn[None, :] < N) & (kk[:, None] < K),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


@triton.jit
def _bias_relu_kernel(y_ptr, b_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(y + b, 0.0), mask=mask)


def _bias_relu(y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = y.contiguous()
    out = torch.empty_like(y)
    n = y.numel()
    _bias_relu_kernel[(triton.cdiv(n, BLOCK),)](y, b, out, n, y.shape[1], BLOCK=BLOCK)
    return out


def _own_gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xc, wc = x.contiguous(), w.contiguous()
    M, K = xc.shape
    N = wc.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gemm_kernel[grid](xc, wc, out, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out


def _watched() -> bool:
    return torch._C._len_torch_dispatch_stack() > 0


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        y = _own_gemm(x, w) if _watched() else torch.mm(x, w.t())
        return _bias_relu(y, self.linear.bias)
