"""level2/01_gemm_bias_relu on cpu-triton: the k-outer loop order.

Technique: each program owns a [BLOCK_M, BLOCK_N] tile of the output and builds it as a sum
of K rank-1 updates, k outermost: acc += x[:, k] (a column of x) times W[:, k] (a row of
W^T), one outer product per k, instead of dot products over K per element. The same
products are summed in the same order as a naive ijk loop, in float32; the bias and the ReLU
are applied once, at the end.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 64


@triton.jit
def _gemm_rank1_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m, mask_n = rm < M, rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K):
        col = tl.load(x_ptr + rm * stride_xm + k * stride_xk, mask=mask_m, other=0.0)
        row = tl.load(w_ptr + rn * stride_wn + k * stride_wk, mask=mask_n, other=0.0)
        acc += col[:, None] * row[None, :]
    bias = tl.load(b_ptr + rn, mask=mask_n, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y,
             mask=mask_m[:, None] & mask_n[None, :])  # fmt: skip


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _gemm_rank1_kernel[grid](
            x, w, b, out, M, N, K,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        )  # fmt: skip
        return out
