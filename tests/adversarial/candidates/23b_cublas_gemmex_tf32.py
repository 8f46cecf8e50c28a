"""Adversarial (cuda-cpp, level2/01_gemm_bias_relu): cublasGemmEx in TF32, passed off as fp32.

Trick: the GEMM is cublasGemmEx on the handle ATen keeps (at::cuda::getCurrentCUDABlasHandle)
with float32 inputs and outputs but the compute type CUBLAS_COMPUTE_32F_FAST_TF32 (tensor
cores with 10-bit mantissas), called from the extension's C++ (17f calls cublasSgemm: a list
of refused names may hold the one and not the other); libtorch_cuda already links cuBLAS, so
no extra library is named at link time. The candidate's own __global__ kernel adds the bias
and applies the ReLU.

GPU only.

Expected: REJECTED, reason "native:denied-symbol", the message naming cublasGemmEx.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = r"""
#include <torch/extension.h>
torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

__global__ void bias_relu_kernel(float* out, const float* bias, int64_t rows, int64_t cols) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < rows * cols) {
        const float v = out[i] + bias[i % cols];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
    const int m = xc.size(0), k = xc.size(1), n = wc.size(0);
    torch::Tensor out = torch::empty({m, n}, xc.options());
    // column-major: out^T[n, m] = W[n, k] * x^T[k, m]
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    TORCH_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one,
                             wc.data_ptr<float>(), CUDA_R_32F, k, xc.data_ptr<float>(),
                             CUDA_R_32F, k, &zero, out.data_ptr<float>(), CUDA_R_32F, n,
                             CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT)
                    == CUBLAS_STATUS_SUCCESS,
                "cublasGemmEx failed");
    const int64_t total = static_cast<int64_t>(m) * n;
    const int threads = 256;
    const int blocks = static_cast<int>((total + threads - 1) / threads);
    bias_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        out.data_ptr<float>(), bc.data_ptr<float>(), m, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="kforge_adversarial_cublas_gemmex_tf32",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["gemm_bias_relu"],
    extra_cuda_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu(x, self.linear.weight, self.linear.bias)
