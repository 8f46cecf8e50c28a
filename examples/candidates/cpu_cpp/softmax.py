"""level1/04_softmax on cpu-cpp.

Technique: numerically stable row softmax in C++. Rows are spread over OpenMP threads; each row
takes a SIMD max reduction, then one pass that writes exp(x - max) to the output while summing
it, then one in-place scaling pass by 1 / sum. The row stays in cache between the passes.
exp is a branch-free inline routine (range reduction x = n*ln2 + r, a degree-7 Taylor polynomial
for e^r, 2^n built in the exponent bits) so the exp loop vectorises without -ffast-math;
it is within a couple of ulp of expf for the non-positive arguments softmax produces.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// e^x for x <= 0 (softmax arguments after the max is subtracted); branch-free so loops that call
// it vectorise. Results below e^-87 (about 1.6e-38) are flushed to 0, which also covers x = -inf.
static inline float exp_nonpos(float x) {
    const float xc = x < -87.0f ? -87.0f : x;
    const float t = xc * 1.44269504088896341f;  // x / ln2, in [-125.6, 0]
    const int32_t n = static_cast<int32_t>(t - 0.5f);  // round to nearest (truncation of t <= 0)
    const float nf = static_cast<float>(n);
    // r = x - n * ln2 with ln2 split in two so n * ln2_hi is exact; |r| <= ln2 / 2.
    const float r = (xc - nf * 0.693359375f) - nf * -2.12194440054690583e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = (n + 127) << 23;  // 2^n, n in [-126, 0]
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    const float y = p * scale;
    return x < -87.0f ? 0.0f : y;
}

torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "row_softmax: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_softmax: expected float32");
    TORCH_CHECK(x.dim() == 2, "row_softmax: expected a 2-D tensor");
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();

    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = in + r * cols;
        float* __restrict__ yr = o + r * cols;

        float m = -std::numeric_limits<float>::infinity();
        #pragma omp simd reduction(max : m)
        for (int64_t c = 0; c < cols; ++c) {
            m = xr[c] > m ? xr[c] : m;
        }

        float s = 0.0f;
        #pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < cols; ++c) {
            const float e = exp_nonpos(xr[c] - m);
            yr[c] = e;
            s += e;
        }

        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            yr[c] *= inv;
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="kforge_cand_cpu_softmax",
    cpp_sources=_CPP_SOURCE,
    functions=["row_softmax"],
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_softmax(x)
