"""Python candidates at run time: the audit hook (pyaudit.py) in a subprocess of its own (an
audit hook cannot be removed), and the seal of the clocks and the harness's classes
(seal.py). The static rules: test_python_rules.py."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys

import pytest

from kforge_search.evaluator import pyaudit, seal
from kforge_search.evaluator.build import load_candidate_class
from kforge_search.evaluator.timing import capture_clocks
from tests.conftest import ROOT

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
