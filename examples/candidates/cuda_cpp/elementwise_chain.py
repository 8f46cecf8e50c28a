"""level1/10_elementwise_chain on cuda-cpp.

Technique: one fused CUDA kernel computes relu(x * 1.5 + 0.25) * 2.0 - 0.1 in registers, so each
element is read once and written once. When both buffers are 16-byte aligned the bulk is moved
as float4 (128-bit loads/stores) by a grid-stride loop whose grid is capped at a few blocks per
SM; the ragged tail (and any unaligned buffer) goes through a scalar grid-stride kernel.
Kernels run on the current stream and every launch is checked.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = r"""
#include <torch/extension.h>
torch::Tensor chain(torch::Tensor x);
"""

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float chain_op(float v) {
    v = v * 1.5f + 0.25f;
    v = v < 0.0f ? 0.0f : v;  // keeps NaN like torch.relu
    return v * 2.0f - 0.1f;
}

__global__ void chain_vec4_kernel(const float4* __restrict__ in, float4* __restrict__ out,
                                  int64_t n4) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
         i += stride) {
        float4 v = in[i];
        v.x = chain_op(v.x);
        v.y = chain_op(v.y);
        v.z = chain_op(v.z);
        v.w = chain_op(v.w);
        out[i] = v;
    }
}

__global__ void chain_scalar_kernel(const float* __restrict__ in, float* __restrict__ out,
                                    int64_t begin, int64_t end) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < end; i += stride) {
        out[i] = chain_op(in[i]);
    }
}

int64_t grid_for(int64_t work_items) {
    const int64_t max_blocks =
        static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 16;
    const int64_t needed = (work_items + kThreads - 1) / kThreads;
    return std::max<int64_t>(1, std::min(needed, max_blocks));
}

}  // namespace

torch::Tensor chain(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "chain: expected a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "chain: expected float32");
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor xc = x.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;

    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();

    const bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(o) % 16 == 0;
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        chain_vec4_kernel<<<static_cast<unsigned int>(grid_for(n4)), kThreads, 0, stream>>>(
            reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(o), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    const int64_t done = n4 * 4;
    if (done < n) {
        chain_scalar_kernel<<<static_cast<unsigned int>(grid_for(n - done)), kThreads, 0,
                              stream>>>(in, o, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_ext = load_inline(
    name="kforge_cand_cuda_elementwise_chain",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["chain"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.chain(x)
