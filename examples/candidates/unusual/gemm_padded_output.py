"""level2/01_gemm_bias_relu on cpu-triton: an output with padded rows (as_strided).

Technique: the output lives in a buffer whose rows are padded to a multiple of 64 elements
(aligned rows, as a GPU kernel writing whole cache lines would want); forward returns the
[M, N] window of it made with as_strided (strides (pitch, 1)): a correct, non-contiguous,
non-dense view. The GEMM itself is a tiled tl.dot in IEEE float32, with the bias and the
ReLU in its epilogue.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 32
BLOCK_K = 32
PITCH = 64  # rows of the output buffer are padded to a multiple of this many elements


@triton.jit
def _gemm_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            w_ptr + rn[None, :] * stride_wn + kk[:, None] * stride_wk,
            mask=(rn[None, :] < N) & (kk[:, None] < K),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        pitch = triton.cdiv(N, PITCH) * PITCH
        buffer = torch.empty(M * pitch, device=x.device, dtype=x.dtype)
        out = buffer.as_strided((M, N), (pitch, 1))
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _gemm_kernel[grid](
            x, w, b, buffer, M, N, K,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), pitch,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )  # fmt: skip
        return out
