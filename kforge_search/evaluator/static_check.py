"""Static check: before anything runs, is there a real kernel for the platform in the source,
does the module stand on its own, and does it keep to the Python a candidate may use
(imports.py: the modules it may import; introspection.py: no doors into the harness)?

Each rule is a small function `check_*(tree, source) -> Finding | None`; presets group them
per platform language. A finding has a named reason (for the store and for tests), a
message that says what to do, and the status it gives the candidate: REJECTED when the
kernel is missing, COMPILE_ERROR when the module cannot run (a name it never defines).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from kforge_search import pysource
from kforge_search.evaluator import imports, introspection
from kforge_search.evaluator.free_names import free_names
from kforge_search.evaluator.result import Status

SHOW_NAMES = 8  # undefined names listed in a finding


@dataclass(frozen=True)
class Finding:
    reason: str
    message: str
    status: Status = Status.REJECTED

    def __post_init__(self) -> None:
        if self.status not in (Status.REJECTED, Status.COMPILE_ERROR):
            raise ValueError(f"a static finding is REJECTED or COMPILE_ERROR, not {self.status}")


@dataclass(frozen=True)
class StaticCheck:
    ok: bool
    findings: tuple[Finding, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(f.reason for f in self.findings)

    @property
    def message(self) -> str:
        return "\n".join(f"- {f.message}" for f in self.findings)

    @property
    def status(self) -> Status:
        """OK, else COMPILE_ERROR where the module cannot run at all, else REJECTED."""
        if self.ok:
            return Status.OK
        if any(f.status is Status.COMPILE_ERROR for f in self.findings):
            return Status.COMPILE_ERROR
        return Status.REJECTED


Rule = Callable[[ast.Module, str], Finding | None]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _calls(tree: ast.Module, suffix: str) -> list[ast.Call]:
    return [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func).endswith(suffix)
    ]


def _strings(tree: ast.Module) -> list[str]:
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def check_model_new(tree: ast.Module, source: str) -> Finding | None:
    if any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return None
    return Finding(
        "static:no-modelnew",
        "no top-level `class ModelNew(nn.Module)`: define it with the same constructor "
        "arguments as Model, and run your kernels in its forward",
    )


def _is_triton_jit(decorator: ast.expr) -> bool:
    name = _dotted(decorator)
    return (
        name in {"jit", "autotune", "heuristics"}
        or name.startswith("triton.")
        or (name.endswith(".jit") and "triton" in name)
    )


def check_triton_kernel(tree: ast.Module, source: str) -> Finding | None:
    kernels = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(_is_triton_jit(d) for d in n.decorator_list)
    ]
    if kernels:
        return None
    return Finding(
        "static:no-triton-kernel",
        "no `@triton.jit` kernel: write the computation as a Triton kernel and launch it "
        "from ModelNew.forward as kernel[grid](...)",
    )


def check_triton_launch(tree: ast.Module, source: str) -> Finding | None:
    launches = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
    ]
    if launches:
        return None
    return Finding(
        "static:no-kernel-launch",
        "no Triton kernel launch (kernel[grid](...)) anywhere: the kernel must be launched",
    )


def check_load_inline(tree: ast.Module, source: str) -> Finding | None:
    if _calls(tree, "load_inline"):
        return None
    return Finding(
        "static:no-load-inline",
        "no torch.utils.cpp_extension.load_inline(...) call: build your C++ source with "
        "load_inline at import time and call its functions from ModelNew.forward",
    )


def check_cuda_global(tree: ast.Module, source: str) -> Finding | None:
    has_cuda_sources = any(
        kw.arg == "cuda_sources" for call in _calls(tree, "load_inline") for kw in call.keywords
    )
    if has_cuda_sources and any("__global__" in s for s in _strings(tree)):
        return None
    return Finding(
        "static:no-cuda-kernel",
        "no CUDA kernel: pass a source with a `__global__` function as load_inline's "
        "cuda_sources and launch it from the host function",
    )


def check_no_cuda_on_cpu(tree: ast.Module, source: str) -> Finding | None:
    for call in _calls(tree, "load_inline"):
        if any(kw.arg == "cuda_sources" for kw in call.keywords):
            return Finding(
                "static:cuda-on-cpu",
                "cpu-cpp candidates build C++ only: move the code to cpp_sources and drop "
                "cuda_sources",
            )
    return None


def check_self_contained(
    tree: ast.Module, source: str, excused: frozenset[str] = frozenset()
) -> Finding | None:
    """Every name the module reads is defined in it (or imported, or a builtin): it runs on
    its own, without the problem's module (`Model`, its helpers and constants). `excused`:
    names the problem itself reads without defining (a published file's dead branch), which
    a candidate that copies that code inherits."""
    found = free_names(tree)
    names = [n for n in found.names if n.name not in excused]
    if not names:  # nothing free, or undecidable (a star import): not flagged
        return None
    shown = ", ".join(f"`{n.name}` (line {n.line})" for n in names[:SHOW_NAMES])
    more = len(names) - SHOW_NAMES
    listed = shown + (f" and {more} more" if more > 0 else "")
    hint = (
        " ModelNew must not refer to Model: write `super().__init__()`."
        if any(n.name == "Model" for n in names)
        else ""
    )
    return Finding(
        "static:undefined-name",
        f"undefined name(s) {listed}: the candidate must be self-contained. It runs on its "
        "own, without the problem's module: define or import every function, class and "
        f"constant it uses in the candidate itself.{hint}",
        Status.COMPILE_ERROR,
    )


def check_imports(tree: ast.Module, source: str) -> Finding | None:
    """Every import names an allowed package (imports.py)."""
    found = imports.denied_imports(tree)
    return Finding("static:import", imports.import_message(found)) if found else None


def check_introspection(tree: ast.Module) -> list[Finding]:
    """No doors into the harness: frames, the heap, code, dispatch switches, numpy
    (introspection.py); one finding per reason."""
    return [
        Finding(reason, introspection.door_message(reason, hits))
        for reason, hits in sorted(introspection.doors(tree).items())
    ]


PRESETS: dict[str, tuple[Rule, ...]] = {
    "triton": (check_model_new, check_triton_kernel, check_triton_launch),
    "cuda-cpp": (check_model_new, check_load_inline, check_cuda_global),
    "cpp": (check_model_new, check_load_inline, check_no_cuda_on_cpu),
}


def excused_names(problem_source: str) -> frozenset[str]:
    """The names a problem's own source reads without defining (see check_self_contained)."""
    try:
        return frozenset(free_names(pysource.parse(problem_source)).free)
    except SyntaxError:
        return frozenset()


def static_check(
    source: str, language: str, excused: frozenset[str] = frozenset(), python_rules: bool = True
) -> StaticCheck:
    """The language's preset rules, then check_self_contained, then (`python_rules`, off only
    to test the defences behind them) the imports and introspection rules (every language:
    each candidate is a Python module)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError as exc:
        return StaticCheck(
            False,
            (Finding("static:syntax-error", f"the candidate is not valid Python: {exc}"),),
        )
    rules = PRESETS.get(language)
    if rules is None:
        return StaticCheck(
            False, (Finding("static:no-backend", f"no static rules for language {language!r}"),)
        )
    findings = [f for rule in rules if (f := rule(tree, source)) is not None]
    if (free := check_self_contained(tree, source, excused)) is not None:
        findings.append(free)
    if python_rules:
        if (imported := check_imports(tree, source)) is not None:
            findings.append(imported)
        findings += check_introspection(tree)
    return StaticCheck(not findings, tuple(findings))
