"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): an ATen operator through its C++ entry point.

Trick: the GEMM and the bias are at::_ops::addmm::call, the operator's C++ entry point
(what at::addmm and Tensor::addmm call inline). The candidate applies the ReLU itself.

Expected: REJECTED, reason "native:denied-symbol", the message naming at::_ops::addmm::call.
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

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor out = at::_ops::addmm::call(b.contiguous(), x.contiguous(), w.t(), 1, 1);
    return bias_relu(out, torch::zeros_like(b));
}
"""

_ext = load_inline(
    name="kforge_adversarial_aten_ops_call",
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
