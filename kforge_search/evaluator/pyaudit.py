"""A Python audit hook against introspection, installed in the candidate's process before it
is imported (model_run.load_guarded), beside guards.WorldGuard's.

While candidate code is the caller, it refuses the interpreter's doors into the harness:
frames (sys._getframe, a traceback's tb_frame, a generator's gi_frame, sys._current_frames),
tracers (sys.settrace, sys.setprofile) and other audit hooks, the heap (gc.get_objects,
get_referrers, get_referents), raw memory and native symbols through ctypes, making code
(exec, eval, compile, code objects and functions built by hand, marshal), importing a module
off the allowlist (imports.py) by any route, and rewiring what is not its own in place (a
function's __code__ or __defaults__, an object's __class__, a class's __bases__). Each
refusal raises PermissionError in the candidate and is recorded in the WorldGuard's
violations, which the worker turns into REJECTED with the reason (sandbox:introspection,
sandbox:gc, sandbox:ctypes, sandbox:code, sandbox:import, sandbox:patch).

"Candidate code is the caller": the events torch and Triton raise on their own (torch's lazy
CUDA calls format the stack, Triton reads its kernels' code) are theirs. Walking out from the
event, frames of the standard library and synthetic ones ("<string>": dataclasses' generated
methods, eval'd code) are passed over, so `inspect.stack()` called by the candidate is the
candidate's; the first other frame decides, and only the candidate's own file counts. Three
refinements: exec, compile, marshal and rewiring are judged by the frame that called them
alone (every import execs a module from the import machinery; dataclasses exec their
methods; namedtuple and Enum set the __module__ of the classes they make); an import by
the frame that asked for it, past the import machinery (a standard module's own imports are
its own); and frames read by a few standard modules for their own use (namedtuple and typing
read their caller's module name) are theirs.

Plain class attributes (`guards.OpRecorder.__new__ = ...`) and attributes of instances (a
frozen dataclass through object.__setattr__) raise no audit event in CPython 3.11: the seal
(seal.py) finds those. A computed attribute name reaches what no event guards (a closure's
cells, sys.modules once sys is in hand): docs/evaluator.md lists what is left.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from _thread import get_ident
from typing import Any

from kforge_search.evaluator.imports import allowed

CANDIDATE_MODULE = "kforge_candidate"  # the candidate's module name (build.load_candidate_class)

INTROSPECTION = "sandbox:introspection"
GC = "sandbox:gc"
CTYPES = "sandbox:ctypes"
CODE = "sandbox:code"
IMPORT = "sandbox:import"
PATCH = "sandbox:patch"

# How the caller of an event is found (see the module's docstring).
NEAREST = "nearest"  # the first frame outside the standard library
DIRECT = "direct"  # the frame that raised it
IMPORTER = "importer"  # the frame that asked for the import, past the import machinery
FRAMES = "frames"  # NEAREST, unless a frame-reading standard module raised it for itself

# event -> (reason, how its caller is found, what the candidate tried)
EVENTS: dict[str, tuple[str, str, str]] = {
    "sys._getframe": (INTROSPECTION, FRAMES, "reading the interpreter's frames (sys._getframe)"),
    "sys._getframemodulename": (INTROSPECTION, FRAMES, "reading a caller's module name"),
    "sys._current_frames": (INTROSPECTION, NEAREST, "reading every thread's frame"),
    "sys._current_exceptions": (INTROSPECTION, NEAREST, "reading every thread's exception"),
    "sys.settrace": (INTROSPECTION, NEAREST, "setting a tracer (sys.settrace)"),
    "sys.setprofile": (INTROSPECTION, NEAREST, "setting a profiler (sys.setprofile)"),
    "sys.addaudithook": (INTROSPECTION, NEAREST, "adding an audit hook"),
    "gc.get_objects": (GC, NEAREST, "walking the heap (gc.get_objects)"),
    "gc.get_referrers": (GC, NEAREST, "walking the heap (gc.get_referrers)"),
    "gc.get_referents": (GC, NEAREST, "walking the heap (gc.get_referents)"),
    "code.__new__": (CODE, NEAREST, "building a code object"),
    "function.__new__": (CODE, NEAREST, "building a function from a code object"),
    "exec": (CODE, DIRECT, "running code with exec or eval"),
    "compile": (CODE, DIRECT, "compiling code"),
    "marshal.loads": (CODE, DIRECT, "loading marshalled code"),
    "marshal.load": (CODE, DIRECT, "loading marshalled code"),
}
EVENTS.update(
    (f"ctypes.{name}", (CTYPES, NEAREST, f"ctypes ({name}): raw memory and native symbols"))
    for name in (
        "dlopen", "dlsym", "dlsym/handle", "cdata", "cdata/buffer", "addressof", "string_at",
        "wstring_at", "call_function", "PyObj_FromPtr", "create_string_buffer",
        "create_unicode_buffer",
    )
)  # fmt: skip

# Attribute reads CPython audits (object.__getattr__) that hand out a frame.
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})

# Standard modules that read frames for their own use and hand none out: their calls of
# sys._getframe are theirs (namedtuple, TypeVar, NamedTuple, Enum's functional API).
FRAME_READERS = ("collections", "typing", "enum", "warnings")

# Kinds of frames, by file.
CANDIDATE, STDLIB, MACHINERY, READER, SYNTHETIC, OTHER = range(6)
SKIP = {
    NEAREST: frozenset({STDLIB, MACHINERY, READER, SYNTHETIC}),
    DIRECT: frozenset({SYNTHETIC}),
    IMPORTER: frozenset({MACHINERY, SYNTHETIC}),
}


class Refused(PermissionError):
    """What the candidate sees when the hook refuses an event."""


class RefusedHook(RuntimeError):
    """sys.addaudithook drops the new hook, silently, only for a RuntimeError."""


class PyAudit:
    def __init__(self, violations: list[tuple[str, str]], candidate_path: str):
        self.violations = violations  # the WorldGuard's: the worker's checks read them
        self.candidate = {candidate_path, os.path.realpath(candidate_path)}
        paths = sysconfig.get_paths()
        site = {paths["purelib"], paths["platlib"]}
        self._site = tuple(sorted({os.path.join(os.path.realpath(p), "") for p in site}))
        stdlib = {paths["stdlib"], paths["platstdlib"]}
        self._stdlib = tuple(sorted({os.path.join(os.path.realpath(p), "") for p in stdlib}))
        self._kinds: dict[str, int] = {}
        self._busy: set[int] = set()  # threads inside the hook (its own events pass)
        self._getframe = sys._getframe

    # -- frames -----------------------------------------------------------------------------
    def kind(self, filename: str) -> int:
        found = self._kinds.get(filename)
        if found is None:
            found = self._kinds[filename] = self._classify(filename)
        return found

    def _classify(self, filename: str) -> int:
        if filename in self.candidate:
            return CANDIDATE
        if filename.startswith("<frozen importlib"):
            return MACHINERY
        if filename.startswith("<frozen "):
            return STDLIB
        if filename.startswith("<"):
            return SYNTHETIC
        path = os.path.realpath(filename)
        if not path.startswith(self._stdlib) or path.startswith(self._site):
            return OTHER
        inner = os.path.relpath(path, next(p for p in self._stdlib if path.startswith(p)))
        top = inner.split(os.sep)[0].removesuffix(".py")
        if top == "importlib":
            return MACHINERY
        return READER if top in FRAME_READERS else STDLIB

    def caller(self, frame: Any, how: str) -> int:
        """The kind of the frame that stands for the event's caller."""
        if how == FRAMES:
            direct = self.caller(frame, DIRECT)
            return direct if direct == READER else self.caller(frame, NEAREST)
        skip = SKIP[how]
        while frame is not None:
            found = self.kind(frame.f_code.co_filename)
            if found not in skip:
                return found
            frame = frame.f_back
        return OTHER

    # -- events -----------------------------------------------------------------------------
    def rule(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
        """(reason, how the caller is found, what) where the event is refused to candidate
        code; None where it is not refused to anyone."""
        found = EVENTS.get(event)
        if found is not None:
            return found
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in FRAME_ATTRIBUTES:
                return INTROSPECTION, FRAMES, f"reading a frame ({args[1]})"
            return None
        if event in ("object.__setattr__", "object.__delattr__"):
            if args and not self.owned(args[0]):
                name = args[1] if len(args) > 1 else "?"
                what = f"rewiring {_describe(args[0])} in place ({name})"
                return PATCH, DIRECT, what
            return None
        if event == "import":
            if args and isinstance(args[0], str) and not allowed(args[0]):
                return IMPORT, IMPORTER, f"importing {args[0]}"
            return None
        return None

    def owned(self, obj: Any) -> bool:
        """Whether the candidate defined obj (a function of its file, or a class of its
        module or an instance of one): its own it may rewire."""
        if type(obj) is types.FunctionType:
            return obj.__code__.co_filename in self.candidate
        cls = obj if isinstance(obj, type) else type(obj)
        return getattr(cls, "__module__", None) == CANDIDATE_MODULE

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in EVENTS and event not in _SPECIAL:
            return
        me = get_ident()
        if me in self._busy:
            return
        self._busy.add(me)
        try:
            rule = self.rule(event, args)
            if rule is None:
                return
            reason, how, what = rule
            if self.caller(self._getframe(1), how) != CANDIDATE:
                return
            self.violations.append((reason, what))
        finally:
            self._busy.discard(me)
        message = f"kforge sandbox: {what} is not allowed ({reason})"
        raise RefusedHook(message) if event == "sys.addaudithook" else Refused(message)

    def install(self) -> None:
        sys.addaudithook(self.hook)


_SPECIAL = frozenset({"object.__getattr__", "object.__setattr__", "object.__delattr__", "import"})


def _describe(obj: Any) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    if type(obj) is types.FunctionType:
        return f"the function {obj.__module__}.{obj.__qualname__}"
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"


def install(violations: list[tuple[str, str]], candidate_path: str) -> PyAudit:
    """Install the hook for the candidate at candidate_path; it cannot be removed."""
    audit = PyAudit(violations, candidate_path)
    audit.install()
    return audit
