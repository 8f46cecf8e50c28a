"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): torch.mm called back through pybind11.

Trick: the extension imports only what an honest one imports (pybind11, the Python C API,
tensors, c10's guard): it looks up torch.mm with pybind11 (module import, attribute, call)
and calls it under a c10::impl::ExcludeDispatchKeyGuard that switches the Python dispatch
keys off, so the op recorder never sees the GEMM. The extension's own loop adds the bias and
applies the ReLU. docs/evaluator.md lists this ("calling Python back through the allowed
Python C API") as not defended.

Expected: REJECTED, reason "dynamic:torch-fallback" or "native:denied-symbol".
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The C++ source, extension name and flags below are byte-identical in every 28*
# candidate, so the evaluator builds "kforge_adversarial_native_evasion" once for all of them.

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <elf.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// Shared by the 28* candidates: library compute reached without importing it. Every symbol
// this extension imports is on the allowlist: the C++ runtime, pybind11, libc, tensors.

// out[M, N] = relu(out + bias), in place
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

// torch.mm through Python, called back with pybind11, under a guard that switches the Python
// dispatch keys off: the recorder never sees it, and the binary imports no operator
torch::Tensor gemm_python_callback(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    pybind11::object mm = pybind11::module_::import("torch").attr("mm");
    torch::Tensor out;
    {
        c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKeySet(
            {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
        out = mm(x.contiguous(), w.t()).cast<torch::Tensor>().contiguous();
    }
    return bias_relu(out, b.contiguous());
}

using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*,
                       const float*, const float*, const int*, const float*, const int*,
                       const float*, float*, const int*);

// Where libtorch_cpu.so is mapped (its mapping at file offset 0) and its path
static bool find_library(const char* library, uintptr_t* base, std::string* path) {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    if (maps == nullptr) return false;
    char line[4096];
    bool found = false;
    while (!found && std::fgets(line, sizeof line, maps) != nullptr) {
        if (std::strstr(line, library) == nullptr) continue;
        unsigned long start = 0, offset = 0;
        char file[3072];
        if (std::sscanf(line, "%lx-%*x %*s %lx %*s %*s %3071s", &start, &offset, file) == 3 &&
            offset == 0) {
            *base = start;
            *path = file;
            found = true;
        }
    }
    std::fclose(maps);
    return found;
}

// A dynamic symbol's value, read from the library's file (.dynsym and its string table)
static uint64_t symbol_value(const std::string& path, const char* name) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return 0;
    Elf64_Ehdr header;
    uint64_t value = 0;
    if (std::fread(&header, sizeof header, 1, f) == 1) {
        std::vector<Elf64_Shdr> sections(header.e_shnum);
        std::fseek(f, static_cast<long>(header.e_shoff), SEEK_SET);
        const size_t count = sections.size();
        if (std::fread(sections.data(), sizeof(Elf64_Shdr), count, f) == count) {
            for (const Elf64_Shdr& s : sections) {
                if (s.sh_type != SHT_DYNSYM || value != 0) continue;
                const Elf64_Shdr& strings = sections[s.sh_link];
                std::vector<char> names(strings.sh_size);
                std::fseek(f, static_cast<long>(strings.sh_offset), SEEK_SET);
                if (std::fread(names.data(), 1, names.size(), f) != names.size()) break;
                std::vector<Elf64_Sym> symbols(s.sh_size / sizeof(Elf64_Sym));
                std::fseek(f, static_cast<long>(s.sh_offset), SEEK_SET);
                const size_t n = symbols.size();
                if (std::fread(symbols.data(), sizeof(Elf64_Sym), n, f) != n) break;
                for (const Elf64_Sym& sym : symbols) {
                    if (sym.st_value != 0 && sym.st_name < names.size() &&
                        std::strcmp(&names[sym.st_name], name) == 0) {
                        value = sym.st_value;
                        break;
                    }
                }
            }
        }
    }
    std::fclose(f);
    return value;
}

// sgemm_ found by address: the library's load address plus the symbol's value in its file
static Sgemm resolve_sgemm() {
    static Sgemm gemm = [] {
        uintptr_t base = 0;
        std::string path;
        if (!find_library("/libtorch_cpu.so", &base, &path)) return Sgemm(nullptr);
        const uint64_t value = symbol_value(path, "sgemm_");
        return value == 0 ? Sgemm(nullptr) : reinterpret_cast<Sgemm>(base + value);
    }();
    return gemm;
}

torch::Tensor gemm_elf_sgemm(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    Sgemm gemm = resolve_sgemm();
    TORCH_CHECK(gemm != nullptr, "sgemm_ not found in libtorch_cpu.so");
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
    name="kforge_adversarial_native_evasion",
    cpp_sources=_CPP_SOURCE,
    functions=[
        "gemm_python_callback",
        "gemm_elf_sgemm",
    ],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_python_callback(x, self.linear.weight, self.linear.bias)
