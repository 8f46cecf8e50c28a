"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): a BLAS function found at run time.

Trick: the GEMM is libtorch_cpu's sgemm_, found at run time with dlopen + dlsym (no
BLAS symbol among the extension's imports). The candidate adds the bias and applies the ReLU
itself.

Expected: REJECTED, reason "native:denied-symbol", the message naming dlopen and dlsym.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <dlfcn.h>

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

using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*,
                       const float*, const int*, const float*, const int*, const float*, float*,
                       const int*);

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    TORCH_CHECK(lib != nullptr, "libtorch_cpu.so is not loaded");
    Sgemm gemm = reinterpret_cast<Sgemm>(dlsym(lib, "sgemm_"));
    TORCH_CHECK(gemm != nullptr, "sgemm_ not found");
    torch::Tensor xc = x.contiguous(), wc = w.contiguous();
    const int m = xc.size(0), k = xc.size(1), n = wc.size(0);
    torch::Tensor out = torch::empty({m, n}, xc.options());
    const float one = 1.0f, zero = 0.0f;
    gemm("T", "N", &n, &m, &k, &one, wc.data_ptr<float>(), &k, xc.data_ptr<float>(), &k, &zero,
         out.data_ptr<float>(), &n);
    return bias_relu(out, b.contiguous());
}
"""

_ext = load_inline(
    name="kforge_adversarial_dlsym_blas",
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
