"""level1/04_softmax on cpu-cpp.

Technique: numerically stable row softmax in C++. Rows are spread over OpenMP threads; each row
takes a SIMD max reduction, then one pass that writes exp(x - max) to the output while summing
it, then one in-place scaling pass by 1 / sum. The row stays in cache between the passes.
exp is a branch-free inline routine (range reduction x = n*ln2 + r, a degree-7 Taylor polynomial
for e^r, 2^n built in the exponent bits) so the exp loop vectorises without -ffast-math;
it is within a couple of ulp of expf for the non-positive arguments softmax produces.
The row routine is also compiled for AVX2+FMA and that build is picked at run time when the CPU
supports it (GCC/Clang function target attribute, x86 only).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__GNUC__) || defined(__clang__)
#define KF_INLINE inline __attribute__((always_inline))
#else
#define KF_INLINE inline
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define KF_X86_DISPATCH 1
#endif

namespace {

// e^x for x <= 0 (softmax arguments after the max is subtracted); branch-free so loops that call
// it vectorise. Arguments are clamped to -88: there n reaches -127, whose exponent field is 0, so
// 2^n comes out as 0 and results below about 1e-38 flush to 0 (x = -inf gives 0 too).
KF_INLINE float exp_nonpos(float x) {
    const float xc = x < -88.0f ? -88.0f : x;
    const float t = xc * 1.44269504088896341f;  // x / ln2, in [-126.96, 0]
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
    const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;  // 2^n, n in [-127, 0]
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

KF_INLINE void softmax_row_body(const float* __restrict__ xr, float* __restrict__ yr,
                                int64_t cols) {
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

using RowFn = void (*)(const float*, float*, int64_t);

// Portable build (SSE2 on x86-64).
void softmax_row_generic(const float* xr, float* yr, int64_t cols) {
    softmax_row_body(xr, yr, cols);
}

#ifdef KF_X86_DISPATCH
// The same code compiled for AVX2 + FMA, chosen at run time when the CPU has them.
__attribute__((target("avx2,fma"))) void softmax_row_avx2(const float* xr, float* yr,
                                                         int64_t cols) {
    softmax_row_body(xr, yr, cols);
}
#endif

RowFn pick_row_fn() {
#ifdef KF_X86_DISPATCH
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return softmax_row_avx2;
#endif
    return softmax_row_generic;
}

}  // namespace

torch::Tensor row_softmax(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "row_softmax: expected a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_softmax: expected float32");
    TORCH_CHECK(x.dim() == 2, "row_softmax: expected a 2-D tensor");
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    if (rows == 0 || cols == 0) return out;
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    static const RowFn row_fn = pick_row_fn();

    // Small inputs stay on one thread: a parallel region costs more than it saves there.
    #pragma omp parallel for schedule(static) if (rows > 1 && rows * cols >= (int64_t{1} << 15))
    for (int64_t r = 0; r < rows; ++r) {
        row_fn(in + r * cols, o + r * cols, cols);
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
