"""The op signature of a problem, read from its source without running torch.

`Model.__init__` tells what `self.<name>` layers are (`self.linear = nn.Linear(...)`);
`Model.forward` gives the ops in evaluation order: torch/F calls, layer calls, tensor
methods and arithmetic operators. `torch.relu(self.linear(x))` is ``linear,relu``.
The signature is hashed into a small unit vector (op names and adjacent pairs) that DuckDB
compares with `array_cosine_similarity`.
"""

from __future__ import annotations

import ast
import hashlib
import math
import re
from dataclasses import dataclass

from kforge_search import pysource

VECTOR_DIM = 64
_BIAS = "<model>"  # a feature every vector has: no vector is all zeros (cosine undefined)
_OPERATORS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.MatMult: "matmul",
    ast.Pow: "pow",
}
_ALIASES = {"mm": "matmul", "silu": "swish", "true_divide": "div", "multiply": "mul"}
_SKIP = {"super", "__init__", "size", "dim", "len", "range", "int", "float", "print", "isinstance"}
_MODULES = {"torch", "nn", "F", "functional", "torch.nn", "torch.nn.functional", "math"}


@dataclass(frozen=True)
class OpSignature:
    ops: tuple[str, ...]

    @property
    def text(self) -> str:
        return ",".join(self.ops)

    def vector(self) -> tuple[float, ...]:
        """Unigrams (weight 1) and adjacent pairs (weight 0.5) hashed into VECTOR_DIM bins."""
        bins = [0.0] * VECTOR_DIM
        features = [(_BIAS, 0.25)] + [(op, 1.0) for op in self.ops]
        features += [(f"{a}>{b}", 0.5) for a, b in zip(self.ops, self.ops[1:], strict=False)]
        for name, weight in features:
            bins[_bin(name)] += weight
        norm = math.sqrt(sum(v * v for v in bins))
        return tuple(v / norm for v in bins)


def _bin(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest()) % VECTOR_DIM


def canonical(name: str) -> str:
    """`GroupNorm` and `group_norm` -> group_norm; `BatchNorm1d` -> batch_norm; `mm` -> matmul."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().strip("_")
    snake = re.sub(r"(norm)[123]d$", r"\1", snake)  # BatchNorm1d is batch_norm
    return _ALIASES.get(snake, snake)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


class _Ops(ast.NodeVisitor):
    """Collects ops in evaluation order: arguments before the call that uses them."""

    def __init__(self, layers: dict[str, str]):
        self.layers = layers
        self.ops: list[str] = []

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.generic_visit(node)
        if type(node.op) in _OPERATORS:
            self.ops.append(_OPERATORS[type(node.op)])

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        op = self._name(node.func)
        if op and op not in _SKIP:
            self.ops.append(canonical(op))

    def _name(self, func: ast.expr) -> str:
        path = _dotted(func)
        if path.startswith("self.") and path.count(".") == 1:
            return self.layers.get(path[5:], "")
        if isinstance(func, ast.Attribute):
            owner = _dotted(func.value)
            if owner in _MODULES or not owner.startswith("self."):
                return func.attr  # torch.relu, F.gelu, x.sum
            return ""
        return path if isinstance(func, ast.Name) and path not in _SKIP else ""


def _model(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _layers(init: ast.FunctionDef | None) -> dict[str, str]:
    """`self.linear = nn.Linear(...)` -> {"linear": "Linear"}."""
    layers: dict[str, str] = {}
    for node in ast.walk(init) if init else ():
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            kind = _dotted(node.value.func).rsplit(".", 1)[-1]
            for target in node.targets:
                path = _dotted(target)
                if kind and path.startswith("self.") and path.count(".") == 1:
                    layers[path[5:]] = kind
    return layers


def op_signature(source: str) -> OpSignature:
    """The ops of `Model.forward`; empty when the source has no parsable Model."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return OpSignature(())
    cls = _model(tree)
    forward = _method(cls, "forward") if cls else None
    if cls is None or forward is None:
        return OpSignature(())
    visitor = _Ops(_layers(_method(cls, "__init__")))
    for stmt in forward.body:
        visitor.visit(stmt)
    return OpSignature(tuple(visitor.ops))
