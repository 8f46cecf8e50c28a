from __future__ import annotations

import pytest

from kforge_search.evaluator.static_check import static_check

TRITON_OK = """
import triton, triton.language as tl
@triton.jit
def k(x):
    pass
class ModelNew:
    def forward(self, x):
        k[(1,)](x)
"""

CPP_OK = """
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="e", cpp_sources="int f(){return 1;}", functions=["f"])
class ModelNew:
    pass
"""

CUDA_OK = """
from torch.utils.cpp_extension import load_inline
src = "__global__ void k(float* x) {}"
ext = load_inline(name="e", cpp_sources="void f();", cuda_sources=src, functions=["f"])
class ModelNew:
    pass
"""


@pytest.mark.parametrize(
    ("language", "source"), [("triton", TRITON_OK), ("cpp", CPP_OK), ("cuda-cpp", CUDA_OK)]
)
def test_real_kernels_pass(language, source):
    assert static_check(source, language).ok


@pytest.mark.parametrize(
    ("language", "source", "reason"),
    [
        ("triton", "class ModelNew:\n    pass\n", "static:no-triton-kernel"),
        ("triton", TRITON_OK.replace("k[(1,)](x)", "pass"), "static:no-kernel-launch"),
        ("triton", TRITON_OK.replace("class ModelNew", "class Other"), "static:no-modelnew"),
        ("cpp", "import torch\nclass ModelNew:\n    pass\n", "static:no-load-inline"),
        ("cpp", CUDA_OK, "static:cuda-on-cpu"),
        ("cuda-cpp", CPP_OK, "static:no-cuda-kernel"),
        ("cuda-cpp", "def broken(:\n", "static:syntax-error"),
    ],
)
def test_missing_kernels_are_named(language, source, reason):
    check = static_check(source, language)
    assert not check.ok
    assert reason in check.reasons
    assert check.message.startswith("- ")
