"""Python candidates' imports and introspection: the static rules (imports.py,
introspection.py) on small sources, on the shipped candidates and on the builtin agent's
drafts. The runtime audit hook and the seal: test_pyaudit.py."""

from __future__ import annotations

import textwrap

import pytest

from kforge_search.evaluator import imports
from kforge_search.evaluator.static_check import static_check
from tests.conftest import EXAMPLES, ROOT

KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        k[(1,)](x)
        return x
"""


def _check(extra: str, python_rules: bool = True):
    return static_check(KERNEL + textwrap.dedent(extra), "triton", python_rules=python_rules)


def _python_reasons(check) -> set[str]:
    return {
        r
        for r in check.reasons
        if r.split(":")[1] in {"import", "introspection", "dispatch", "numpy"}
    }


# -- static: imports ----------------------------------------------------------------------


def test_every_allowed_module_imports_anywhere():
    lines = [f"import {m}" for m in sorted(imports.ALLOWED_IMPORTS - {"__future__"})]
    source = (
        "from __future__ import annotations\n"
        + KERNEL
        + "\n".join(lines)
        + (
            "\n\ndef helper():\n    import collections.abc\n    from os import path\n"
            "    from torch.utils.cpp_extension import load_inline\n    return path, load_inline\n"
        )
    )
    check = static_check(source, "triton")
    assert not _python_reasons(check), check.message


@pytest.mark.parametrize(
    "module",
    [
        "ctypes", "gc", "inspect", "sys", "numpy", "scipy.linalg", "importlib", "builtins",
        "threading", "multiprocessing", "concurrent.futures", "subprocess", "socket", "signal",
        "atexit", "pickle", "marshal", "mmap", "kforge_search.evaluator.guards", "pytest",
        "code", "codeop", "types", "traceback", "weakref", "time", "xml.dom",
    ],
)  # fmt: skip
def test_a_denied_module_is_rejected_naming_it_and_its_line(module):
    check = _check(f"\n\ndef helper():\n    import {module}\n")
    assert check.reasons == ("static:import",), check.message
    line = len((KERNEL + "\n\ndef helper():\n").splitlines()) + 1
    assert f"`{module}` (line {line}" in check.message
    assert "may import torch, triton" in check.message


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("from numpy import zeros\n", "numpy"),
        ("from . import sibling\n", "."),
        ("from torch import sys\n", "torch.sys"),
        ("MODULES = torch.sys.modules\n", "torch.sys"),
        ("CT = torch.ctypes\n", "torch.ctypes"),
        ("S = getattr(torch, 'sys')\n", "sys"),
    ],
)
def test_modules_reached_another_way_are_imports_too(source, named):
    check = _check(source)
    assert "static:import" in check.reasons, check.message
    assert f"`{named}`" in check.message


def test_advice_says_what_to_do_instead():
    check = _check("import numpy as np\nimport time\n")
    assert "constants with math" in check.message and "timing is the harness's" in check.message


# -- static: introspection, dispatch, numpy -----------------------------------------------


@pytest.mark.parametrize(
    ("source", "reason", "named"),
    [
        ("G = __import__('gc')\n", "static:introspection", "`__import__`"),
        ("exec('x = 1')\n", "static:introspection", "`exec`"),
        ("X = eval('1')\n", "static:introspection", "`eval`"),
        ("C = compile('1', 's', 'eval')\n", "static:introspection", "`compile`"),
        ("G = globals()\n", "static:introspection", "`globals`"),
        ("V = vars(torch)\n", "static:introspection", "`vars`"),
        ("B = __builtins__\n", "static:introspection", "`__builtins__`"),
        ("G = k.__globals__\n", "static:introspection", "`k.__globals__`"),
        ("G = getattr(k, '__globals__')\n", "static:introspection", "'__globals__'"),
        ("S = object.__subclasses__()\n", "static:introspection", "`object.__subclasses__`"),
        ("def f(e):\n    return e.__traceback__.tb_frame.f_back\n", "static:introspection",
         "tb_frame"),
        ("def f(g):\n    return g.gi_frame\n", "static:introspection", "`g.gi_frame`"),
        ("def f(x, v):\n    object.__setattr__(x, 'a', v)\n", "static:introspection",
         "`object.__setattr__`"),
        ("def f(c, v):\n    type.__setattr__(c, 'a', v)\n", "static:introspection",
         "`type.__setattr__`"),
        ("def f(x, c):\n    x.__class__ = c\n", "static:introspection", "`x.__class__` assigned"),
        ("def f(a, b):\n    a.__code__ = b\n", "static:introspection", "__code__"),
        ("def f(c):\n    return c.cell_contents\n", "static:introspection", "cell_contents"),
        ("D = torch._C._DisableTorchDispatch\n", "static:dispatch", "_DisableTorchDispatch"),
        ("from torch.utils._python_dispatch import _disable_current_modes\n", "static:dispatch",
         "_python_dispatch"),
        ("G = torch._C._ExcludeDispatchKeyGuard\n", "static:dispatch", "ExcludeDispatchKeyGuard"),
        ("N = torch._C._len_torch_dispatch_stack()\n", "static:dispatch", "dispatch_stack"),
        ("def f(x):\n    return x.numpy()\n", "static:numpy", "`x.numpy`"),
        ("def f(a):\n    return torch.from_numpy(a)\n", "static:numpy", "`torch.from_numpy`"),
        ("NP = torch.nn.functional.np\n", "static:numpy", "`torch.nn.functional.np`"),
    ],
)  # fmt: skip
def test_doors_into_the_harness_are_named(source, reason, named):
    check = _check(source)
    assert reason in check.reasons, check.message
    assert named in check.message, check.message
    assert "(line " in check.message


HONEST_IDIOMS = """
import os
import re
import math
from dataclasses import dataclass
from collections import namedtuple


Pair = namedtuple("Pair", "a b")
PATTERN = re.compile(r"\\d+")
ARCH = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
CPP = "AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), \\"k\\", [&] { run<scalar_t>(x); });"


@dataclass(frozen=True)
class Tile:
    rows: int = 64


def dispatch_rows(x):  # a helper of the candidate's own named "dispatch"
    return x


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        for i in range(n):
            setattr(self, f"w{i}", torch.nn.Parameter(torch.ones(1)))
        super().__setattr__("n", n)
        self.eval()

    def derived(self, key, tensor, make):
        tag = (tensor.data_ptr(), tensor._version)
        hit = self.__dict__.get(key)
        if hit is None or hit[0] != tag:
            hit = self.__dict__[key] = (tag, make(tensor.detach()))
        return hit[1], type(self).__name__, getattr(self, f"w{0}"), math.inf
"""


def test_honest_idioms_pass():
    check = _check(HONEST_IDIOMS)
    assert check.ok, check.message


def test_the_python_rules_can_be_turned_off_for_tests_of_the_layers_behind():
    source = "import gc\nN = len(gc.get_objects())\n"
    assert not _check(source).ok
    assert _check(source, python_rules=False).ok


SHIPPED = sorted(
    [
        *EXAMPLES.rglob("*.py"),
        *(ROOT / "prompts" / "oneshot").glob("*.txt"),
        *(ROOT / "tests" / "fixtures" / "broken").rglob("*.py"),
        *(ROOT / "tests" / "fixtures" / "numerics").glob("*.py"),
        ROOT / "tests" / "fixtures" / "training" / "batchnorm1d_triton.py",
        ROOT / "tests" / "fixtures" / "leftovers" / "cpp_fork.py",
    ]
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_candidates_keep_to_the_python_rules(path):
    """Examples, one-shot prompts, honest and broken fixtures (they fail for other reasons)."""
    language = {"cpu_cpp": "cpp", "cuda_cpp": "cuda-cpp"}.get(path.parent.name, "triton")
    if path.suffix == ".txt":
        language = {"cpp.txt": "cpp", "cuda_cpp.txt": "cuda-cpp"}.get(path.name, "triton")
    check = static_check(path.read_text(), language)
    assert not _python_reasons(check), check.message


def test_builtin_drafts_keep_to_the_python_rules():
    """The builtin agent's drafts, every template it has (Triton and C++), for each of this
    repository's problems it supports."""
    from kforge_search.agents.base import Context
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.platforms import get_platform
    from kforge_search.problem import find_problems

    drafted = 0
    problems, _ = find_problems()
    for problem in problems:
        for platform in ("cpu-triton", "cpu-cpp"):
            for draft in BuiltinAgent().propose(Context(problem, get_platform(platform), "strict")):
                check = static_check(draft.source, get_platform(platform).language)
                assert not _python_reasons(check), f"{problem.id} {platform}: {check.message}"
                drafted += 1
    assert drafted >= 20
