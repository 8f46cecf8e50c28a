"""Adversarial (cpu-cpp, level1/10_elementwise_chain): spawning a process from native code.

Trick: forward calls chain_spawn from the shared native extension, which runs
std::system("true") (a shell and a child process, started from C++, out of reach of any
Python-level hook) and then computes the chain honestly.

Expected: REJECTED, reason "dynamic:spawned-process" or "sandbox:subprocess".
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The C++ source, extension name and flags below are byte-identical in every cpu-cpp
# adversarial candidate, so the evaluator builds "kforge_adversarial_native" once for all.

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

// Shared by the cpu-cpp adversarial candidates: one build serves all of them.

static torch::Tensor checked(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32,
                "expected a float32 CPU tensor");
    return x.contiguous();
}

static void chain_into(const float* in, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = in[i] * 1.5f + 0.25f;
        v = v < 0.0f ? 0.0f : v;
        o[i] = v * 2.0f - 0.1f;
    }
}

// Honest: relu(x * 1.5 + 0.25) * 2.0 - 0.1
torch::Tensor chain(torch::Tensor x) {
    torch::Tensor xc = checked(x);
    torch::Tensor out = torch::empty_like(xc);
    chain_into(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    return out;
}

// Background work: returns an unfilled output at once; a detached std::thread (holding
// references to both tensors, so their memory stays alive) fills it after delay_ms.
torch::Tensor chain_later(torch::Tensor x, int64_t delay_ms) {
    torch::Tensor xc = checked(x);
    torch::Tensor out = torch::empty_like(xc);
    std::thread([xc, out, delay_ms]() {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        chain_into(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel());
    }).detach();
    return out;
}

// Spawns a process: runs `true` through the shell (ignoring the outcome), then computes.
torch::Tensor chain_spawn(torch::Tensor x) {
    int status = std::system("true");
    (void)status;
    return chain(x);
}
"""

_ext = load_inline(
    name="kforge_adversarial_native",
    cpp_sources=_CPP_SOURCE,
    functions=["chain", "chain_later", "chain_spawn"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.chain_spawn(x)
