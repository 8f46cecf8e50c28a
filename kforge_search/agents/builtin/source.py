"""What a candidate keeps from the problem's source: imports, Model's constructor (as
ModelNew's, so parameters are created the same way, in the same order, under the same seed),
Model's other helper methods, and the top-level definitions the constructor refers to."""

from __future__ import annotations

import ast
from dataclasses import dataclass

_SKIP = {"Model", "get_inputs", "get_init_inputs", "KFORGE_SIZES"}
_PRELUDE = {"import torch", "import torch.nn as nn"}  # every candidate imports these


@dataclass(frozen=True)
class ModelSource:
    imports: str  # the problem's top-level imports
    helpers: str  # top-level definitions the constructor needs
    bases: str  # Model's base classes, e.g. "nn.Module"
    methods: str  # __init__ and helper methods, indented for a class body
    forward_args: str  # forward's parameters without self, e.g. "x: torch.Tensor"


def _names(node: ast.AST) -> set[str]:
    """Names a definition reads from outside: loads, less its own arguments and locals."""
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local = {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    local |= {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments) for a in ast.walk(n)
              if isinstance(a, ast.arg)}  # fmt: skip
    return used - local


def _defined(node: ast.stmt) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def model_source(source: str) -> ModelSource:
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise ValueError("the problem defines no class Model")
    methods = [n for n in model.body if isinstance(n, ast.FunctionDef)]
    forward = next((m for m in methods if m.name == "forward"), None)
    if forward is None or not any(m.name == "__init__" for m in methods):
        raise ValueError("Model needs __init__ and forward")
    kept = [m for m in methods if m.name != "forward"]
    forward_args = ast.arguments(
        posonlyargs=[],
        args=forward.args.args[1:],
        vararg=forward.args.vararg,
        kwonlyargs=forward.args.kwonlyargs,
        kw_defaults=forward.args.kw_defaults,
        kwarg=forward.args.kwarg,
        defaults=forward.args.defaults,
    )
    imports = [
        n
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom) and ast.unparse(n) not in _PRELUDE
    ]
    defs = {name: n for n in tree.body if (name := _defined(n)) and name not in _SKIP}
    wanted: set[str] = set()
    frontier = set().union(*(_names(m) for m in kept), *(_names(b) for b in model.bases))
    while frontier:
        name = frontier.pop()
        if name in defs and name not in wanted:
            wanted.add(name)
            frontier |= _names(defs[name])
    helpers = [n for n in tree.body if _defined(n) in wanted]
    body = "\n\n".join(_indent(ast.unparse(m)) for m in kept)
    return ModelSource(
        imports="\n".join(ast.unparse(n) for n in imports),
        helpers="\n\n\n".join(ast.unparse(n) for n in helpers),
        bases=", ".join(ast.unparse(b) for b in model.bases) or "nn.Module",
        methods=body,
        forward_args=ast.unparse(forward_args),
    )


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())
