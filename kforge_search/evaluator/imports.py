"""Static check: the modules a candidate may import.

A candidate is torch and Triton code with a little standard-library help; everything else it
could import is a door out of the sandbox (ctypes, gc, inspect, sys: the harness's memory,
objects and frames), compute that is not its kernels (numpy, scipy), or work outside forward
(threading, subprocess, time). Every `import X` and `from X import ...` in the module,
at any depth (inside functions too), must name a package of ALLOWED_IMPORTS; so must a
module reached as an attribute of an allowed one (`torch.sys`, `torch.ctypes`: torch's own
imports are attributes of torch) or named by a string (`getattr(torch, "sys")`). The
runtime audit hook (pyaudit.py) refuses the same modules when candidate code imports them by
other means.
"""

from __future__ import annotations

import ast

# Top-level packages a candidate may import. torch and triton are the work; einops is in
# KernelBench's problems; the rest is standard library without a door: math, containers,
# typing, text, os (os.environ and os.path for build folders; processes and writes are the
# audit hook's), tempfile, pathlib, shutil, glob, uuid, errno (build folders: what is written
# is the audit hook's and Landlock's).
ALLOWED_IMPORTS = frozenset(
    {
        "torch", "triton", "einops",
        "__future__", "abc", "bisect", "cmath", "collections", "contextlib", "copy",
        "dataclasses", "decimal", "enum", "errno", "fractions", "functools", "glob", "hashlib",
        "heapq", "io", "itertools", "json", "math", "numbers", "operator", "os", "pathlib",
        "random", "re", "shutil", "statistics", "string", "struct", "tempfile", "textwrap",
        "typing", "typing_extensions", "uuid", "warnings",
    }
)  # fmt: skip

# What to do instead, for the modules candidates reach for most.
ADVICE = {
    "numpy": "compute in your kernels; constants with math",
    "scipy": "compute in your kernels",
    "sys": "math.inf and float('inf') for limits; nothing else of sys is a kernel's",
    "time": "timing is the harness's",
    "gc": "the harness's objects are off limits",
    "inspect": "the harness's frames and code are off limits",
    "traceback": "the harness's frames are off limits",
    "ctypes": "native code goes through load_inline, where its imports are checked",
    "types": "define functions and classes with def and class",
    "importlib": "import what you need with a plain import",
    "builtins": "use the builtins by name",
    "threading": "forward's work is done when it returns, in its own kernels",
    "multiprocessing": "forward's work is done when it returns, in its own kernels",
    "concurrent": "forward's work is done when it returns, in its own kernels",
    "subprocess": "candidates run no programs",
    "socket": "candidates use no network",
    "kforge_search": "the evaluator is not the candidate's to import",
}

# Modules that allowed packages expose as attributes (torch.sys, torch.ctypes,
# torch.nn.functional.np ...): reached that way, they are imports too. Only names no
# honest candidate uses as an attribute of its own.
MODULE_ATTRIBUTES = frozenset(
    {
        "sys", "gc", "ctypes", "inspect", "importlib", "builtins", "scipy", "threading",
        "multiprocessing", "subprocess", "socket", "traceback", "weakref", "marshal", "pickle",
        "_thread", "atexit",
    }
)  # fmt: skip

SHOW = 8  # imports listed in a finding


def allowed(module: str) -> bool:
    """Whether a candidate may import `module` (a dotted name; relative ones never)."""
    return not module.startswith(".") and module.split(".")[0] in ALLOWED_IMPORTS


def denied_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for every import the candidate may not make, in source order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if not allowed(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if not allowed(module):
                found.append((node.lineno, module))
            else:
                found += [
                    (node.lineno, f"{module}.{a.name}")
                    for a in node.names
                    if a.name in MODULE_ATTRIBUTES
                ]
        elif isinstance(node, ast.Attribute) and node.attr in MODULE_ATTRIBUTES:
            found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        elif isinstance(node, ast.Constant) and node.value in MODULE_ATTRIBUTES:
            found.append((node.lineno, node.value))
    return sorted(found)


def _advice(module: str) -> str:
    name = module.lstrip(".").split(".")
    for part in (name[0], name[-1]):
        if part in ADVICE:
            return f": {ADVICE[part]}"
    if module.startswith("."):
        return ": a candidate is a module of its own, with no package"
    return ""


def import_message(found: list[tuple[int, str]]) -> str:
    shown = ", ".join(f"`{m}` (line {line}{_advice(m)})" for line, m in found[:SHOW])
    more = len(found) - SHOW
    listed = shown + (f" and {more} more" if more > 0 else "")
    standard = sorted(ALLOWED_IMPORTS - {"torch", "triton", "einops", "__future__"})
    return (
        f"import(s) outside the allowlist: {listed}. A candidate may import torch, triton, "
        f"einops and these standard modules: {', '.join(standard)}. Remove the import and "
        "what uses it."
    )
