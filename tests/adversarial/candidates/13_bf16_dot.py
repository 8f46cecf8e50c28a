"""Adversarial (cpu-triton, level2/01_gemm_bias_relu, policy "strict"): precision below policy.

Trick: a tiled GEMM + bias + ReLU whose tiles are cast to bfloat16 before tl.dot (fp32
accumulation), which runs on tensor cores at several times the fp32-accurate rate. bf16 keeps
8 bits of mantissa: at the "ci" size (K = 96) the results are off by a few 1e-3 and about half
of the elements miss the strict fp32 tolerance (atol = rtol = 1e-4).

On cpu-triton, Triton 3.9's interpreter gets tl.dot on bf16 operands wrong in its own way (it
multiplies the raw 16-bit patterns, so the values are off by orders of magnitude); on a GPU
the error is the few 1e-3 above. Either way the result must not pass.

Expected: INCORRECT.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32


@triton.jit
def _gemm_bias_relu_bf16_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        k_ok = k < K
        a = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + k[None, :] * stride_xk,
            mask=mask_m[:, None] & k_ok[None, :],
            other=0.0,
        )
        # [BLOCK_K, BLOCK_N] view of W^T: element (k, n) is W[n, k].
        b = tl.load(
            w_ptr + offs_n[None, :] * stride_wn + k[:, None] * stride_wk,
            mask=k_ok[:, None] & mask_n[None, :],
            other=0.0,
        )
        acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
    bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        b = self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _gemm_bias_relu_bf16_kernel[grid](
            x,
            w,
            b,
            out,
            M,
            N,
            K,
            x.stride(0),
            x.stride(1),
            w.stride(0),
            w.stride(1),
            out.stride(0),
            out.stride(1),
            BLOCK_M=BLOCK_M,
            BLOCK_N=BLOCK_N,
            BLOCK_K=BLOCK_K,
        )
        return out
