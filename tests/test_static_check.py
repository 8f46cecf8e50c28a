from __future__ import annotations

import pytest

from kforge_search.evaluator.result import Status
from kforge_search.evaluator.static_check import excused_names, static_check
from tests.conftest import EXAMPLES, ROOT

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


# -- self-contained: every name a candidate reads is defined in it --------------------------

REFERS_TO_MODEL = TRITON_OK.replace(
    "class ModelNew:\n",
    "class ModelNew(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n",
).replace("import triton, ", "import torch.nn as nn\nimport triton, ")
UNDEFINED_HELPER = TRITON_OK.replace("k[(1,)](x)", "k[(1,)](fold_in(x))")
UNDEFINED_CONSTANT = TRITON_OK.replace("k[(1,)](x)", "k[(BLOCK_SIZE,)](x)")


@pytest.mark.parametrize(
    ("language", "source", "name"),
    [
        ("triton", REFERS_TO_MODEL, "Model"),
        ("triton", UNDEFINED_HELPER, "fold_in"),
        ("triton", UNDEFINED_CONSTANT, "BLOCK_SIZE"),
        ("cpp", CPP_OK.replace("class ModelNew:\n    pass", "class ModelNew(Base):\n    pass"),
         "Base"),
        ("cuda-cpp", CUDA_OK.replace('name="e"', "name=EXT_NAME"), "EXT_NAME"),
    ],
)  # fmt: skip
def test_an_undefined_name_is_a_compile_error_naming_it(language, source, name):
    check = static_check(source, language)
    assert not check.ok
    assert check.reasons == ("static:undefined-name",)
    assert check.status is Status.COMPILE_ERROR
    assert f"`{name}`" in check.message and "self-contained" in check.message
    assert ("super().__init__()" in check.message) == (name == "Model")


def test_undefined_names_are_listed_with_their_lines_in_order():
    source = TRITON_OK.replace("k[(1,)](x)", "k[(B,)](x, A)\n        return C")
    check = static_check(source, "triton")
    line = source.splitlines().index("        k[(B,)](x, A)") + 1
    assert f"`B` (line {line}), `A` (line {line}), `C` (line {line + 1})" in check.message


def test_a_missing_kernel_stays_rejected_and_a_free_name_outranks_it():
    assert static_check("class ModelNew:\n    pass\n", "triton").status is Status.REJECTED
    both = static_check("class ModelNew(Model):\n    pass\n", "triton")
    assert both.status is Status.COMPILE_ERROR
    assert {"static:no-triton-kernel", "static:undefined-name"} <= set(both.reasons)


HONEST_SCOPING = """
from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError as missing:
    TensorDescriptor = None
    REASON = str(missing)

SCALE = 2.0
HALF = SCALE / 2  # a constant computed from another


@triton.jit
def _scale(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


def _launch(x, out, factor=HALF):
    def grid(meta):
        return (triton.cdiv(x.numel(), meta["BLOCK"]),)

    _scale[grid](x, out, x.numel(), FACTOR=factor * _twice(), BLOCK=BLOCK)


def _twice():  # defined after its first use inside a function: fine
    return 2


BLOCK = 1024


class ModelNew(nn.Module):
    KINDS = ("a", "b")
    NAMES = [k.upper() for k in KINDS]
    LOOKUP = {k: v for k, v in zip(KINDS, NAMES)}

    def __init__(self, dims: int = 3, *sizes: int, eps: float = 1e-5, **extra: object):
        super().__init__()
        self.eps = eps
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.sizes = [s * 2 for s in sizes if (doubled := s * 2) > 0]
        for i, (name, value) in enumerate(sorted(extra.items())):
            setattr(self, f"extra{i}_{name}", value)
        with torch.no_grad() as _unused:
            pass
        total = 0

        def add(v):
            nonlocal total
            total += v

        for s in sizes:
            add(s)
        self.total = total
        self.first = (lambda *a, k=1: a[:k])(sizes)
        try:
            self.extra = int(extra.get("x", 0))
        except (TypeError, ValueError) as err:
            self.extra = str(err)
        match dims:
            case {"n": n, **rest}:
                self.n = (n, rest)
            case [first, *others]:
                self.n = (first, others)
            case int() as d if d > 0:
                self.n = d
            case _:
                self.n = None
        del total

    @property
    def scale(self) -> float:
        return SCALE * ModelNew.KINDS.__len__() / len(self.KINDS)

    @scale.setter
    def scale(self, value: float) -> None:
        raise AttributeError(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global _CALLS
        _CALLS = getattr(self, "_calls", 0) + 1
        out = torch.empty_like(x)
        _launch(x.contiguous(), out)
        assert __name__ and __file__ and __class__
        return out
"""


def test_no_false_positive_on_python_scoping():
    check = static_check(HONEST_SCOPING, "triton")
    assert check.ok, check.message


def test_a_star_import_leaves_the_names_undecided():
    source = "from math import *\n" + TRITON_OK.replace("k[(1,)](x)", "k[(1,)](floor(x))")
    assert static_check(source, "triton").ok


def test_class_body_names_are_not_visible_in_methods_or_comprehensions():
    source = TRITON_OK.replace(
        "class ModelNew:\n",
        "class ModelNew:\n    N = 4\n    M = [N for _ in range(2)]\n"
        "    def size(self):\n        return N\n",
    )
    check = static_check(source, "triton")
    assert check.status is Status.COMPILE_ERROR and "`N`" in check.message


def test_a_read_guarded_by_a_name_error_handler_is_not_flagged():
    source = TRITON_OK.replace(
        "k[(1,)](x)",
        "try:\n            TUNED\n        except NameError:\n            pass\n        k[(1,)](x)",
    )
    assert static_check(source, "triton").ok


HONEST_FILES = sorted(
    [
        *(EXAMPLES).rglob("*.py"),
        *(ROOT / "tests" / "adversarial" / "candidates").glob("*.py"),
        *(ROOT / "tests" / "fixtures" / "broken").rglob("*.py"),
        *(ROOT / "prompts" / "oneshot").glob("*.txt"),
    ]
)


@pytest.mark.parametrize("path", HONEST_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_shipped_candidate_has_an_undefined_name(path):
    """Examples, one-shot prompts, the adversarial and broken fixtures (they fail for other
    reasons, never for a name they lack)."""
    language = {"cpu_cpp": "cpp", "cuda_cpp": "cuda-cpp"}.get(path.parent.name, "triton")
    if path.suffix == ".txt":
        language = {"cpp.txt": "cpp", "cuda_cpp.txt": "cuda-cpp"}.get(path.name, "triton")
    check = static_check(path.read_text(), language)
    assert "static:undefined-name" not in check.reasons, check.message


def test_the_evaluator_answers_compile_error_before_building(tmp_path):
    from kforge_search.evaluator import EvalConfig, Evaluator
    from kforge_search.platforms import get_platform
    from kforge_search.problem import resolve_problem

    source = (EXAMPLES / "triton" / "elementwise_chain.py").read_text()
    broken = source.replace("super().__init__()", "super(Model, self).__init__()", 1)
    assert broken != source
    evaluator = Evaluator(EvalConfig(baselines=(), spare_child=False))
    result = evaluator.evaluate_source(
        broken, resolve_problem("level1/10_elementwise_chain", size_set="ci"),
        get_platform("cpu-triton"),
    )  # fmt: skip
    evaluator.close()
    assert result.status is Status.COMPILE_ERROR and result.stage == "static_check"
    assert result.artifacts.reasons == ("static:undefined-name",)
    assert "`Model`" in result.message and "self-contained" in result.message
    assert [name for name, _ in result.phases] == ["static_check"]  # nothing built or run


def test_names_the_problem_itself_leaves_undefined_are_excused():
    """A published file's dead branch (Swin's `checkpoint.checkpoint` under use_checkpoint)
    reads a name it never defines; a candidate that copies that helper inherits it."""
    problem = "class Model:\n    def forward(self, x):\n        return checkpoint.run(x)\n"
    assert excused_names(problem) == {"checkpoint"}
    source = TRITON_OK.replace("k[(1,)](x)", "k[(1,)](x) if x else checkpoint.run(x)")
    assert not static_check(source, "triton").ok
    assert static_check(source, "triton", excused_names(problem)).ok
    still = static_check(source + "y = Model\n", "triton", excused_names(problem))
    assert "`Model`" in still.message and "checkpoint" not in still.message
