"""Static check: introspection doors in a candidate's source.

The harness shares the candidate's process: its frames hold the job (seeds, paths), its
objects the clocks and the guards. What reaches them from Python is a short list of names:
frames (`sys._getframe`, a traceback's `tb_frame`, a frame's `f_back`), the heap
(`gc.get_objects`), code and globals (`__code__`, `__globals__`, `__builtins__`,
`__import__`, exec, eval, compile), writes that bypass a frozen object or a class
(`object.__setattr__`), and torch's dispatch machinery, whose switches hide torch's own
operators from the op recorder (`torch._C._DisableTorchDispatch`). numpy compute reaches
tensors through `.numpy()` and `torch.from_numpy`. Each use is a named finding here; the
runtime audit hook (pyaudit.py) refuses what a computed name or a string reaches anyway.
"""

from __future__ import annotations

import ast

INTROSPECTION = "static:introspection"
DISPATCH = "static:dispatch"
NUMPY = "static:numpy"

# Builtins that run or find code by name, or hand out a module's namespace.
DENIED_NAMES = frozenset(
    {"__import__", "__builtins__", "exec", "eval", "compile", "globals", "vars", "breakpoint"}
)

# Attributes that lead to frames, the heap, code objects, other modules' globals, or the
# interpreter's hooks (also denied as string constants: getattr(x, "__globals__")).
DOOR_ATTRIBUTES = frozenset(
    {
        "__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__",
        "cell_contents", "__import__",
        "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace",
        "tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
        "_getframe", "_getframemodulename", "_current_frames", "_current_exceptions",
        "settrace", "setprofile", "addaudithook", "get_objects", "get_referrers",
        "get_referents",
    }
)  # fmt: skip

# Attributes whose assignment rewires an object or a function in place.
REWIRING = frozenset({"__class__", "__bases__", "__code__", "__defaults__", "__kwdefaults__"})

# torch's switches of its dispatch: parts of their names (CamelCase "Dispatch": the guards
# and key sets of torch._C) and whole names.
DISPATCH_PARTS = (
    "Dispatch", "torch_dispatch", "python_dispatch", "dispatch_mode", "dispatch_key",
    "dispatch_stack", "_dispatch_tls", "TorchFunction",
)  # fmt: skip
DISPATCH_NAMES = frozenset(
    {
        "_pop_mode", "_push_mode", "_pop_mode_temporarily", "_disable_current_modes",
        "_disable_infra_mode", "redispatch", "_dispatch_call_boxed",
    }
)  # fmt: skip

NUMPY_ATTRIBUTES = frozenset(
    {"numpy", "np", "from_numpy", "__array__", "__array_interface__", "__array_struct__"}
)

ADVICE = {
    INTROSPECTION: (
        "the harness's frames, objects and code are off limits: compute the outputs from "
        "forward's inputs with your kernels"
    ),
    DISPATCH: (
        "torch's dispatch machinery is the harness's (it sees every torch operator "
        "forward runs): call your kernels, and torch only to allocate, view and copy"
    ),
    NUMPY: "numpy compute is not your kernels: do the work in them",
}
SHOW = 8


def _dispatch(name: str) -> bool:
    return name in DISPATCH_NAMES or any(part in name for part in DISPATCH_PARTS)


def _attribute(node: ast.Attribute) -> tuple[str, str] | None:
    attr = node.attr
    where = f"`{ast.unparse(node)}`"
    if attr in NUMPY_ATTRIBUTES:
        return NUMPY, where
    if _dispatch(attr):
        return DISPATCH, where
    if attr in DOOR_ATTRIBUTES:
        return INTROSPECTION, where
    if isinstance(node.ctx, ast.Store | ast.Del) and attr in REWIRING:
        return INTROSPECTION, f"{where} assigned"
    base = node.value  # object.__setattr__: writes through frozen objects; type's: into classes
    if attr in {"__setattr__", "__delattr__"} and ast.unparse(base) in {"object", "type"}:
        return INTROSPECTION, where
    return None


def _node(node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute):
        return _attribute(node)
    if isinstance(node, ast.Name) and node.id in DENIED_NAMES:
        return INTROSPECTION, f"`{node.id}`"
    if isinstance(node, ast.Constant) and node.value in DOOR_ATTRIBUTES:
        return INTROSPECTION, f"the string {node.value!r}"
    if isinstance(node, ast.ImportFrom):
        names = [node.module or "", *(a.name for a in node.names)]
        if any(_dispatch(part) for name in names for part in name.split(".")):
            return DISPATCH, f"`from {node.module} import ...`"
        if any(a.name in NUMPY_ATTRIBUTES for a in node.names):
            return NUMPY, f"`from {node.module} import ...`"
    return None


def doors(tree: ast.AST) -> dict[str, list[tuple[int, str]]]:
    """Per reason, (line, what) for each door the source opens, in source order."""
    found: dict[str, list[tuple[int, str]]] = {}
    for node in ast.walk(tree):
        hit = _node(node)
        if hit is not None:
            found.setdefault(hit[0], []).append((getattr(node, "lineno", 0), hit[1]))
    return {reason: sorted(set(hits)) for reason, hits in found.items()}


def door_message(reason: str, hits: list[tuple[int, str]]) -> str:
    shown = ", ".join(f"{what} (line {line})" for line, what in hits[:SHOW])
    more = len(hits) - SHOW
    listed = shown + (f" and {more} more" if more > 0 else "")
    return f"{listed}: {ADVICE[reason]}. Remove them."
