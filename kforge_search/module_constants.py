"""A problem's module-level constants, read and rewritten without running the file.

KernelBench files bind their sizes at module level in several forms: `n = 4096`,
`M = 1024 * 2`, `height = width = 256`, `depth, height, width = (16, 32, 32)`, and values
computed from others (`bias_shape = (out_channels, 1, 1)`). `evaluate` follows the bindings
in order with a small arithmetic evaluator (no calls, no imports: the parent never runs
problem code); `rewrite` replaces the bound values of overridden names so that every value
computed from them afterwards follows.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kforge_search import pysource

SIZES_NAME = "KFORGE_SIZES"
_MAX_ITEMS = 4096  # a longer list or tuple is not a constant we describe (`[0] * 10**9`)
_MAX_INT = 1 << 62

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


class Opaque(Exception):
    """An expression this module does not evaluate (a call, an unknown name, ...)."""


@dataclass(frozen=True)
class Binding:
    """One module-level name bound by statement `index` of the module's body."""

    name: str
    index: int
    expr: ast.expr | None  # the expression bound to this name; None when it cannot be told

    @property
    def free(self) -> bool:
        """Bound to a value that refers to no other name (`8`, `1024 * 2`, `(3, 5)`)."""
        return self.expr is not None and not any(
            isinstance(n, ast.Name) for n in ast.walk(self.expr)
        )


def bindings(tree: ast.Module) -> Iterator[Binding]:
    """Every module-level name binding by plain assignment, in source order."""
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                yield Binding(node.target.id, index, node.value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from _target_bindings(target, node.value, index)


def _target_bindings(target: ast.expr, value: ast.expr | None, index: int) -> Iterator[Binding]:
    if isinstance(target, ast.Name):
        yield Binding(target.id, index, value)
    elif isinstance(target, ast.Tuple | ast.List):
        same_shape = isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
        for i, element in enumerate(target.elts):
            part = value.elts[i] if same_shape and value is not None else None
            if isinstance(part, ast.Starred):
                part = None
            yield from _target_bindings(element, part, index)


def assignable(tree: ast.Module) -> set[str]:
    """Names an override may set: every module-level binding but the size sets."""
    return {b.name for b in bindings(tree) if b.name != SIZES_NAME}


def evaluate(tree: ast.Module, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The value of every module-level constant after the whole module has run, with the
    overrides in place of the bound values; names bound to what cannot be evaluated
    (calls, classes, ...) are left out."""
    values = dict(overrides or {})
    env: dict[str, Any] = {}
    for binding in bindings(tree):
        if binding.name == SIZES_NAME:
            continue
        if binding.name in values:
            env[binding.name] = values[binding.name]
            continue
        try:
            env[binding.name] = value_of(binding.expr, env)
        except Opaque:
            env.pop(binding.name, None)
    return env


def free_constants(tree: ast.Module) -> dict[str, Any]:
    """Constants whose last binding refers to no other name, evaluated; lists as tuples."""
    last = {b.name: b for b in bindings(tree) if b.name != SIZES_NAME}
    env = evaluate(tree)
    return {
        name: tuple(env[name]) if isinstance(env[name], list) else env[name]
        for name, b in last.items()
        if b.free and name in env
    }


def value_of(node: ast.expr | None, env: Mapping[str, Any]) -> Any:
    """Evaluate literals, names in `env`, tuples, lists and arithmetic; raise Opaque else."""
    if node is None:
        raise Opaque("no expression")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise Opaque(node.id)
        return env[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        items: list[Any] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                items.extend(_sequence(value_of(element.value, env)))
            else:
                items.append(value_of(element, env))
        return _bounded(tuple(items) if isinstance(node, ast.Tuple) else items)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = value_of(node.left, env), value_of(node.right, env)
        if isinstance(node.op, ast.Pow) and (not isinstance(right, int) or abs(right) > 64):
            raise Opaque("power")
        if isinstance(node.op, ast.Mult) and _too_long(left, right):
            raise Opaque("repetition")
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except (TypeError, ZeroDivisionError, OverflowError, ValueError) as exc:
            raise Opaque(str(exc)) from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        try:
            return _UNARY[type(node.op)](value_of(node.operand, env))
        except TypeError as exc:
            raise Opaque(str(exc)) from None
    raise Opaque(type(node).__name__)


def _sequence(value: Any) -> list[Any]:
    if not isinstance(value, tuple | list):
        raise Opaque("starred non-sequence")
    return list(value)


def _too_long(left: Any, right: Any) -> bool:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, tuple | list | str) and isinstance(count, int):
            return len(seq) * count > _MAX_ITEMS
    return False


def _bounded(value: Any) -> Any:
    if isinstance(value, tuple | list | str) and len(value) > _MAX_ITEMS:
        raise Opaque("too long")
    if isinstance(value, int) and abs(value) > _MAX_INT:
        raise Opaque("too large")
    return value


def rewrite(tree: ast.Module, overrides: Mapping[str, Any]) -> ast.Module:
    """The module with every binding of an overridden name set to the override: a plain
    or annotated assignment gets the new value, an unpacking of a literal tuple the new
    element, any other binding (`a = b = 1`, `a, b = f()`) is followed by `name = value`.
    Bindings that are not overridden stay as written, so values computed from overridden
    names follow them. A value is written as a list where the name was bound to a list."""
    defaults = evaluate(tree)
    body: list[ast.stmt] = []
    for node in tree.body:
        names = [b.name for b in _statement_bindings(node) if b.name in overrides]
        if not names:
            body.append(node)
            continue

        def literal(name: str) -> ast.expr:
            return _literal(overrides[name], defaults.get(name))

        if isinstance(node, ast.AnnAssign) or _plain(node):
            node.value = literal(names[0])
        elif isinstance(node, ast.Assign) and _unpacks_literal(node):
            targets, values = node.targets[0], node.value
            for i, element in enumerate(targets.elts):  # type: ignore[attr-defined]
                if isinstance(element, ast.Name) and element.id in overrides:
                    values.elts[i] = literal(element.id)  # type: ignore[attr-defined]
        else:
            body.append(node)
            body.extend(
                ast.Assign(targets=[ast.Name(n, ctx=ast.Store())], value=literal(n))
                for n in dict.fromkeys(names)
            )
            continue
        body.append(node)
    tree.body = body
    return ast.fix_missing_locations(tree)


def _statement_bindings(node: ast.stmt) -> list[Binding]:
    return list(bindings(ast.Module(body=[node], type_ignores=[])))


def _plain(node: ast.stmt) -> bool:
    """`name = value`: one target, a name."""
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    )


def _unpacks_literal(node: ast.Assign) -> bool:
    if len(node.targets) != 1:
        return False
    target, value = node.targets[0], node.value
    return (
        isinstance(target, ast.Tuple | ast.List)
        and all(isinstance(e, ast.Name) for e in target.elts)
        and isinstance(value, ast.Tuple | ast.List)
        and len(value.elts) == len(target.elts)
        and not any(isinstance(e, ast.Starred) for e in value.elts)
    )


def _literal(value: Any, default: Any) -> ast.expr:
    """`value` as source; a sequence takes the kind (tuple or list) the name had."""
    if isinstance(value, tuple | list) and isinstance(default, tuple | list):
        value = type(default)(value)
    try:
        node = pysource.parse(repr(value), mode="eval").body
        ast.literal_eval(node)
    except (SyntaxError, ValueError):
        raise ValueError(f"{value!r} cannot be written as a Python literal") from None
    return node
