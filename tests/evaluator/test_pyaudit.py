"""Python candidates' imports and introspection: the static rules (imports.py,
introspection.py) on small sources, the runtime audit hook (pyaudit.py) in a subprocess of
its own (an audit hook cannot be removed), and the seal of the clocks and the harness's
classes (seal.py)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import textwrap

import pytest

from kforge_search.evaluator import imports, pyaudit, seal
from kforge_search.evaluator.build import load_candidate_class
from kforge_search.evaluator.static_check import static_check
from kforge_search.evaluator.timing import capture_clocks
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


# -- runtime: the audit hook --------------------------------------------------------------

# A module of "another library" (not the candidate, not the standard library): what it does
# on its own is its own, even when the candidate calls it.
LIBRARY = """
import inspect
import sys


class Harness:
    pass


class Other:
    pass


def harness_function(a=1):
    return a


def look():
    return sys._getframe(0) is not None and len(inspect.stack()) > 0
"""

# The candidate: each function tries one thing; the runner records what was refused.
CANDIDATE = """
import collections
import ctypes
import dataclasses
import enum
import functools
import gc
import inspect
import marshal
import sys
import types
import typing
import warnings

import library


def frame():
    return sys._getframe()


def inspect_stack():
    return len(inspect.stack())


def inspect_currentframe():
    return inspect.currentframe()


def traceback_frame():
    try:
        raise ValueError
    except ValueError as exc:
        return exc.__traceback__.tb_frame


def generator_frame():
    def gen():
        yield 1
    return gen().gi_frame


def current_frames():
    return sys._current_frames()


def settrace():
    sys.settrace(None)


def setprofile():
    sys.setprofile(None)


def get_objects():
    return len(gc.get_objects())


def get_referrers():
    return gc.get_referrers(library.Harness)


def ctypes_string_at():
    return ctypes.string_at(id(library), 8)


def ctypes_dlopen():
    return ctypes.CDLL(None)


def run_exec():
    exec("x = 1", {})


def run_eval():
    return eval("1 + 1")


def run_compile():
    return compile("1", "s", "eval")


def make_function():
    return types.FunctionType(library.harness_function.__code__, {})


def replace_code():
    return library.harness_function.__code__.replace(co_name="x")


def marshal_loads():
    return marshal.loads(marshal.dumps(1))


def patch_code():
    library.harness_function.__code__ = own.__code__


def patch_defaults():
    library.harness_function.__defaults__ = (2,)


def patch_class():
    obj = library.Harness()
    obj.__class__ = library.Other


def patch_class_name():
    library.Harness.__name__ = "Renamed"


def import_denied():
    import xmlrpc.client
    return xmlrpc.client


def dunder_import_denied():
    return __import__("wave")


def add_audit_hook():
    sys.addaudithook(lambda event, args: None)


# allowed


def own(a=1):
    return a


class Own:
    pass


class OwnToo:
    pass


def own_rewiring():
    own.__defaults__ = (3,)
    obj = Own()
    obj.__class__ = OwnToo
    Own.__name__ = "Mine"


def named_tuple():
    return collections.namedtuple("Point", "x y")(1, 2)


def typing_things():
    T = typing.TypeVar("T")

    class P(typing.NamedTuple):
        a: int

    return T, P(1)


def enum_functional():
    return enum.Enum("Color", "RED GREEN").RED


def a_dataclass():
    @dataclasses.dataclass(frozen=True)
    class D:
        a: int = 1

    return D()


def wrapped():
    @functools.wraps(own)
    def w(*a):
        return own(*a)

    return w()


def warn():
    warnings.warn("a warning", stacklevel=2)


def import_allowed():
    import fractions
    import statistics
    return fractions, statistics


def library_looks():
    return library.look()
"""

RUNNER = """
import gc
import importlib.util
import json
import sys
import warnings

sys.path.insert(0, sys.argv[1])
warnings.simplefilter("ignore")
# what the worker has imported before a candidate runs (torch imports most of it)
import collections, ctypes, dataclasses, enum, functools, inspect, marshal, types, typing
import library
from kforge_search.evaluator import pyaudit

path = sys.argv[2]
violations = []
pyaudit.install(violations, path)
spec = importlib.util.spec_from_file_location(pyaudit.CANDIDATE_MODULE, path)
module = importlib.util.module_from_spec(spec)
sys.modules[pyaudit.CANDIDATE_MODULE] = module
spec.loader.exec_module(module)
results = {}
for name in sys.argv[3:]:
    before = len(violations)
    try:
        getattr(module, name)()
        refused = False
    except PermissionError:
        refused = True
    results[name] = [refused, [r for r, _ in violations[before:]]]
harness = bool(gc.get_objects()) and sys._getframe(0) is not None  # the harness's own
print(json.dumps({"results": results, "harness": harness}))
"""

DENIED = {
    "frame": "sandbox:introspection",
    "inspect_stack": "sandbox:introspection",
    "inspect_currentframe": "sandbox:introspection",
    "traceback_frame": "sandbox:introspection",
    "generator_frame": "sandbox:introspection",
    "current_frames": "sandbox:introspection",
    "settrace": "sandbox:introspection",
    "setprofile": "sandbox:introspection",
    "get_objects": "sandbox:gc",
    "get_referrers": "sandbox:gc",
    "ctypes_string_at": "sandbox:ctypes",
    "ctypes_dlopen": "sandbox:ctypes",
    "run_exec": "sandbox:code",
    "run_eval": "sandbox:code",
    "run_compile": "sandbox:code",
    "make_function": "sandbox:code",
    "replace_code": "sandbox:code",
    "marshal_loads": "sandbox:code",
    "patch_code": "sandbox:patch",
    "patch_defaults": "sandbox:patch",
    "patch_class": "sandbox:patch",
    "patch_class_name": "sandbox:patch",
    "import_denied": "sandbox:import",
    "dunder_import_denied": "sandbox:import",
}
ALLOWED = [
    "own_rewiring", "named_tuple", "typing_things", "enum_functional", "a_dataclass",
    "wrapped", "warn", "import_allowed", "library_looks",
]  # fmt: skip


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("pyaudit")
    (folder / "library.py").write_text(LIBRARY)
    (folder / "candidate.py").write_text(CANDIDATE)
    (folder / "runner.py").write_text(RUNNER)
    names = [*DENIED, *ALLOWED, "add_audit_hook"]
    done = subprocess.run(
        [sys.executable, str(folder / "runner.py"), str(folder), str(folder / "candidate.py"),
         *names],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("name", "reason"), sorted(DENIED.items()))
def test_the_hook_refuses_candidate_code_and_records_why(audited, name, reason):
    refused, recorded = audited["results"][name]
    assert refused, f"{name} was not refused"
    assert recorded[:1] == [reason], recorded


@pytest.mark.parametrize("name", ALLOWED)
def test_honest_python_and_other_libraries_are_not_refused(audited, name):
    refused, recorded = audited["results"][name]
    assert not refused and not recorded, f"{name}: {recorded}"


def test_a_second_audit_hook_is_dropped_and_recorded(audited):
    refused, recorded = audited["results"]["add_audit_hook"]
    assert not refused  # sys.addaudithook drops the hook silently (a RuntimeError)
    assert recorded == ["sandbox:introspection"]


def test_the_harness_itself_is_not_refused(audited):
    assert audited["harness"] is True


def test_the_hook_knows_the_candidates_module_name():
    default = inspect.signature(load_candidate_class).parameters["module_name"].default
    assert default == pyaudit.CANDIDATE_MODULE


# -- the seal: clocks and classes ---------------------------------------------------------


def test_the_seal_finds_the_frozen_clocks_rewritten():
    clocks = capture_clocks("cpu")
    sealed = seal.Seal([], seal.clock_fields(clocks))
    assert sealed.changed() == []
    real = clocks.perf_counter
    object.__setattr__(clocks, "perf_counter", lambda: 0.0)
    assert sealed.changed() == ["clocks.perf_counter"]
    object.__setattr__(clocks, "perf_counter", real)
    assert sealed.changed() == []
    labels = {label for label, _, _ in seal.clock_fields(clocks)}
    assert labels == {f"clocks.{f.name}" for f in dataclasses.fields(clocks)} | {"clocks.__class__"}


def test_the_seal_finds_class_attributes_replaced_added_and_removed():
    class Guard:
        def check(self) -> bool:
            return True

    sealed = seal.Seal([], classes=[(Guard, True)])
    original = Guard.check
    Guard.check = lambda self: False  # type: ignore[method-assign]
    assert sealed.changed() == [f"{__name__}.{Guard.__qualname__}.check"]
    Guard.check = original  # type: ignore[method-assign]
    Guard.__enter__ = lambda self: self  # type: ignore[attr-defined]
    assert sealed.changed() == [f"{__name__}.{Guard.__qualname__}.__enter__"]
    del Guard.__enter__
    assert sealed.changed() == []


def test_the_harness_seal_covers_the_recorder_and_its_torch_base():
    from torch.utils._python_dispatch import TorchDispatchMode

    from kforge_search.evaluator import guards

    classes = dict(seal.harness_classes())
    assert classes[guards.OpRecorder] is True and classes[guards.WorldGuard] is True
    assert classes[TorchDispatchMode] is False  # torch's own: replaced members only
    labels = {label for label, _, _ in seal.dispatch_targets()}
    assert "torch.utils._python_dispatch._push_mode" in labels
    sealed = seal.harness_seal(capture_clocks("cpu"))
    assert sealed.changed() == []
    original = vars(guards.OpRecorder)["__new__"]  # the staticmethod itself
    try:
        guards.OpRecorder.__new__ = staticmethod(lambda cls: None)  # type: ignore[assignment]
        assert "kforge_search.evaluator.guards.OpRecorder.__new__" in sealed.changed()
    finally:
        guards.OpRecorder.__new__ = original  # type: ignore[method-assign]
    assert sealed.changed() == []
