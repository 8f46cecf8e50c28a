"""level2/01_gemm_bias_relu on cpu-triton: the weight prepared once, in __init__.

Technique: nn.Linear keeps W as [N, K]; the kernel wants W^T as [K, N] with unit stride
along N, so __init__ makes that copy once (weights are init inputs: they do not change
between calls) and registers it as a non-persistent buffer, so that .to(device) moves it with
the module. forward then runs a tiled tl.dot (IEEE float32) over x and the prepared W^T,
with the bias and the ReLU in the epilogue; no per-call transpose or copy.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 32
BLOCK_K = 32


@triton.jit
def _gemm_kernel(
    x_ptr, wt_ptr, b_ptr, out_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
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
            wt_ptr + kk[:, None] * N + rn[None, :],
            mask=(kk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.register_buffer(
            "weight_t", self.linear.weight.detach().t().contiguous(), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        M, K = xc.shape
        N = self.weight_t.shape[1]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _gemm_kernel[grid](
            xc, self.weight_t, self.linear.bias, out, M, N, K,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )  # fmt: skip
        return out
