"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): the BLAS symbol libtorch exports.

Trick: the GEMM is sgemm_, declared extern "C" and linked against the copy of BLAS
that libtorch_cpu exports; no ATen operator runs. The candidate adds the bias and applies the
ReLU itself.

Expected: REJECTED, reason "native:denied-symbol", the message naming sgemm_.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

// out[M, N] = relu(out + bias), in place: the only arithmetic the candidate does itself
static torch::Tensor bias_relu(torch::Tensor out, const torch::Tensor& bias) {
    float* o = out.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    const int64_t rows = out.size(0), cols = out.size(1);
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            const float v = o[i * cols + j] + b[j];
            o[i * cols + j] = v > 0.0f ? v : 0.0f;
        }
    }
    return out;
}
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);
using Sgemm = decltype(&sgemm_);

// x @ w^T by Fortran BLAS: column-major, so out^T[N, M] = w[N, K] * x^T[K, M]
static torch::Tensor blas_gemm(Sgemm gemm, const torch::Tensor& x, const torch::Tensor& w) {
    torch::Tensor xc = x.contiguous(), wc = w.contiguous();
    const int m = xc.size(0), k = xc.size(1), n = wc.size(0);
    torch::Tensor out = torch::empty({m, n}, xc.options());
    const float one = 1.0f, zero = 0.0f;
    gemm("T", "N", &n, &m, &k, &one, wc.data_ptr<float>(), &k, xc.data_ptr<float>(), &k, &zero,
         out.data_ptr<float>(), &n);
    return out;
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return bias_relu(blas_gemm(&sgemm_, x, w), b.contiguous());
}
"""

_ext = load_inline(
    name="kforge_adversarial_extern_sgemm",
    cpp_sources=_CPP_SOURCE,
    functions=["gemm_bias_relu"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu(x, self.linear.weight, self.linear.bias)
