"""level1/10_elementwise_chain on cpu-cpp.

Technique: the whole chain relu(x * 1.5 + 0.25) * 2.0 - 0.1 is fused into one pass over memory
in C++: one OpenMP-parallel, SIMD-vectorised loop over the flat contiguous buffer, so every
element is read once and written once (the eager reference makes four passes).
-fno-trapping-math lets GCC if-convert the ReLU select so the loop vectorises.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor chain(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "chain: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "chain: expected float32");
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const float* __restrict__ in = xc.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    // Small inputs stay on one thread: a parallel region costs more than it saves there.
    #pragma omp parallel for simd schedule(static) if (n >= (int64_t{1} << 16))
    for (int64_t i = 0; i < n; ++i) {
        float v = in[i] * 1.5f + 0.25f;
        v = v < 0.0f ? 0.0f : v;  // keeps NaN like torch.relu
        o[i] = v * 2.0f - 0.1f;
    }
    return out;
}
"""

_ext = load_inline(
    name="kforge_cand_cpu_elementwise_chain",
    cpp_sources=_CPP_SOURCE,
    functions=["chain"],
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.chain(x)
