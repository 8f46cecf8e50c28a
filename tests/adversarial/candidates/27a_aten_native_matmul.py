"""Adversarial (cpu-cpp, level2/01_gemm_bias_relu): at::native::matmul called from C++.

Trick: the GEMM is at::native::matmul, ATen's composite implementation of matmul, called
directly from the extension: no dispatcher, so an operator recorder never sees it (it then
calls the mm kernel itself). The extension's own loop adds the bias and applies the ReLU.

Expected: REJECTED, reason "native:denied-symbol", the message naming at::native::matmul.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The C++ source, extension name and flags below are byte-identical in every 27*
# candidate, so the evaluator builds "kforge_adversarial_native_compute" once for all of them.

_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
#include <ATen/ops/matmul_native.h>
#include <ATen/ops/mm_ops.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

// Shared by the 27* candidates: one build serves all of them. Each function computes the
// GEMM of level2/01_gemm_bias_relu with somebody else's code; the candidate's own loop adds
// the bias and applies the ReLU.

extern "C" void dgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const double* alpha, const double* a, const int* lda,
                       const double* b, const int* ldb, const double* beta, double* c,
                       const int* ldc);

// out[M, N] = relu(out + bias), in place, in float32
static torch::Tensor bias_relu(torch::Tensor out, const torch::Tensor& bias) {
    torch::Tensor o32 = out.scalar_type() == torch::kFloat32 ? out.contiguous()
                                                             : out.to(torch::kFloat32);
    float* o = o32.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    const int64_t rows = o32.size(0), cols = o32.size(1);
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            const float v = o[i * cols + j] + b[j];
            o[i * cols + j] = v > 0.0f ? v : 0.0f;
        }
    }
    return o32;
}

static c10::DispatchKeySet python_keys() {
    return c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot});
}

// ATen's composite matmul, its at::native implementation called directly
torch::Tensor gemm_native_matmul(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    return bias_relu(at::native::matmul(x.contiguous(), w.t()), b.contiguous());
}

// Fortran BLAS in float64, "more exact than the reference": out^T = W * x^T, column-major
torch::Tensor gemm_dgemm(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor xd = x.to(torch::kFloat64).contiguous(), wd = w.to(torch::kFloat64).contiguous();
    const int m = xd.size(0), k = xd.size(1), n = wd.size(0);
    torch::Tensor out = torch::empty({m, n}, xd.options());
    const double one = 1.0, zero = 0.0;
    dgemm_("T", "N", &n, &m, &k, &one, wd.data_ptr<double>(), &k, xd.data_ptr<double>(), &k,
           &zero, out.data_ptr<double>(), &n);
    return bias_relu(out, b.contiguous());
}

// An operator's redispatch entry point with a key set of CPU alone: below the Python keys
torch::Tensor gemm_redispatch(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
    return bias_relu(at::_ops::mm::redispatch(cpu, x.contiguous(), w.t()), b.contiguous());
}

// A Tensor method (inline: it calls the operator's entry point) under a guard
torch::Tensor gemm_tensor_method(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor out;
    {
        c10::impl::ExcludeDispatchKeyGuard guard(python_keys());
        out = x.contiguous().mm(w.t());
    }
    return bias_relu(out, b.contiguous());
}

// ATen's CPU kernel for addmm, bias included
torch::Tensor gemm_cpu_addmm(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    torch::Tensor out = at::cpu::addmm(b.contiguous(), x.contiguous(), w.t(), 1, 1);
    return bias_relu(out, torch::zeros_like(b));
}

// Python source run from C++ (torch.mm), under a guard that hides it from the recorder
torch::Tensor gemm_python_source(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    pybind11::dict scope;
    scope["x"] = x;
    scope["w"] = w;
    {
        c10::impl::ExcludeDispatchKeyGuard guard(python_keys());
        PyObject* done = PyRun_String("import torch\nout = torch.mm(x, w.t())\n", Py_file_input,
                                      scope.ptr(), scope.ptr());
        if (done == nullptr) {
            throw pybind11::error_already_set();
        }
        Py_DECREF(done);
    }
    return bias_relu(scope["out"].cast<torch::Tensor>(), b.contiguous());
}
"""

_ext = load_inline(
    name="kforge_adversarial_native_compute",
    cpp_sources=_CPP_SOURCE,
    functions=[
        "gemm_native_matmul",
        "gemm_dgemm",
        "gemm_redispatch",
        "gemm_tensor_method",
        "gemm_cpu_addmm",
        "gemm_python_source",
    ],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_native_matmul(x, self.linear.weight, self.linear.bias)
