"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): library compute from C++, five ways at once.

Trick: one extension reaches compute that is not its own, five ways: ATen's CPU kernel called
directly (at::cpu::mm, no dispatcher, so the op recorder never sees it), an ATen operator
called through its C++ entry point (at::_ops::addmm::call), the BLAS symbol libtorch exports
(sgemm_, declared extern and linked), the same BLAS function found at run time
(dlopen + dlsym), and an ATen operator (at::matmul) under a c10::impl::ExcludeDispatchKeyGuard
that switches off the Python dispatch keys, so the recorder is blind to it. Forward uses that
last one; only the bias and the ReLU are computed by the candidate.

Expected: REJECTED, reason "native:denied-symbol", the message naming at::cpu::mm,
at::_ops::addmm::call, sgemm_, dlopen, dlsym and at::_ops::matmul::call.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <dlfcn.h>

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);
using Sgemm = decltype(&sgemm_);

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

torch::Tensor gemm_cpu_kernel(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return bias_relu(at::cpu::mm(x.contiguous(), w.t()), b.contiguous());
}

torch::Tensor gemm_ops_call(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor zero = torch::zeros_like(b);
    torch::Tensor out = at::_ops::addmm::call(b.contiguous(), x.contiguous(), w.t(), 1, 1);
    return bias_relu(out, zero);
}

torch::Tensor gemm_blas(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return bias_relu(blas_gemm(&sgemm_, x, w), b.contiguous());
}

torch::Tensor gemm_dlsym(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    TORCH_CHECK(lib != nullptr, "libtorch_cpu.so is not loaded");
    Sgemm gemm = reinterpret_cast<Sgemm>(dlsym(lib, "sgemm_"));
    TORCH_CHECK(gemm != nullptr, "sgemm_ not found");
    return bias_relu(blas_gemm(gemm, x, w), b.contiguous());
}

torch::Tensor gemm_guarded(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor out;
    {
        c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKeySet(
            {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
        out = at::matmul(x.contiguous(), w.t()).contiguous();
    }
    return bias_relu(out, b.contiguous());
}
"""

_ext = load_inline(
    name="kforge_adversarial_library_compute",
    cpp_sources=_CPP_SOURCE,
    functions=["gemm_cpu_kernel", "gemm_ops_call", "gemm_blas", "gemm_dlsym", "gemm_guarded"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_guarded(x, self.linear.weight, self.linear.bias)
