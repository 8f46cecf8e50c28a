"""What a candidate keeps from the problem's source: imports, Model's class body but forward
(its constructor as ModelNew's, so parameters are created the same way, in the same order,
under the same seed; helper methods; class attributes), and every top-level definition that
code needs, with what those need in turn, in source order.

A candidate runs on its own, as KernelBench's harness loads it: nothing copied may refer to
a name of the problem's module. `Model` becomes `ModelNew` in the copied code
(`super(Model, self)`, `Model.attr`), and the helpers and constants it reads come along.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kforge_search import pysource
from kforge_search.evaluator.free_names import free_names, module_bindings

_SKIP = {"Model", "get_inputs", "get_init_inputs", "KFORGE_SIZES"}
_PRELUDE = {"import torch", "import torch.nn as nn"}  # every candidate imports these


@dataclass(frozen=True)
class ModelSource:
    imports: str  # the problem's top-level imports
    helpers: str  # top-level definitions the copied code needs, in source order
    bases: str  # Model's base classes, e.g. "nn.Module"
    methods: str  # Model's class body but forward, indented for a class body
    forward_args: str  # forward's parameters without self, e.g. "x: torch.Tensor"


class _AsModelNew(ast.NodeTransformer):
    """`Model` -> `ModelNew`: the candidate's class stands for the problem's."""

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return (
            ast.copy_location(ast.Name("ModelNew", node.ctx), node) if node.id == "Model" else node
        )


def _reads(nodes: list[ast.stmt]) -> set[str]:
    """The names these statements read from the module they are placed in."""
    return set(free_names(ast.Module(body=nodes, type_ignores=[])).free)


def _needed(body: list[ast.stmt], model: ast.ClassDef, forward: ast.FunctionDef) -> list[ast.stmt]:
    """The top-level statements (not imports) that bind what the candidate's copy of Model
    reads (its bases, its class body but forward, forward's signature), and what those read
    in turn, in source order."""
    defs = [
        (n, module_bindings(n))
        for n in body
        if n is not model and not isinstance(n, ast.Import | ast.ImportFrom)
    ]
    defs = [(n, bound) for n, bound in defs if not bound & _SKIP]
    signature = ast.FunctionDef(
        name="forward", args=forward.args, body=[ast.Pass()], decorator_list=[], returns=None
    )
    copy = ast.ClassDef(
        name="ModelNew",
        bases=model.bases,
        keywords=[],
        body=[n for n in model.body if n is not forward] + [signature],
        decorator_list=[],
    )
    wanted: set[ast.stmt] = set()
    frontier = _reads([copy])
    while frontier:
        name = frontier.pop()
        for node, bound in defs:
            if name in bound and node not in wanted:
                wanted.add(node)
                frontier |= _reads([node])
    return [n for n, _ in defs if n in wanted]


def model_source(source: str) -> ModelSource:
    tree = pysource.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise ValueError("the problem defines no class Model")
    methods = [n for n in model.body if isinstance(n, ast.FunctionDef)]
    forward = next((m for m in methods if m.name == "forward"), None)
    if forward is None or not any(m.name == "__init__" for m in methods):
        raise ValueError("Model needs __init__ and forward")
    tree = _AsModelNew().visit(tree)
    kept = [n for n in model.body if n is not forward and not _docstring(n)]
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
        if isinstance(n, ast.Import | ast.ImportFrom)
        and ast.unparse(n) not in _PRELUDE
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")  # not mid-file
    ]
    helpers = _needed(tree.body, model, forward)
    body = "\n\n".join(_indent(ast.unparse(m)) for m in kept)
    return ModelSource(
        imports="\n".join(ast.unparse(n) for n in imports),
        helpers="\n\n\n".join(ast.unparse(n) for n in helpers),
        bases=", ".join(ast.unparse(b) for b in model.bases) or "nn.Module",
        methods=body,
        forward_args=ast.unparse(forward_args),
    )


def _docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())
