"""Free names of a Python module: names it reads that nothing binds, by Python's scoping.

A candidate runs on its own, as KernelBench's harness loads it; a name that neither the
module binds (assignments, defs, classes, imports, loop/with/except targets, comprehension
variables, walrus targets, match captures, arguments, global/nonlocal) nor Python provides
(builtins, module dunders) fails when that code runs. The analysis follows Python's scopes:
function bodies see enclosing functions and the module but not class bodies; comprehensions
are scopes of their own whose first iterable is read outside; default values, decorators,
bases and evaluated annotations are read in the enclosing scope. It is static, so it never
flags what might be defined: a name bound anywhere in a scope counts as bound there (order
and `del` are not followed), a read inside a `try` whose handlers catch NameError is left
alone, and `from x import *` makes the module undecidable.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

# names Python itself provides besides builtins: module attributes, the implicit names of a
# class body, and a method's implicit __class__ cell
IMPLICIT = frozenset(
    {
        "__name__", "__file__", "__doc__", "__package__", "__spec__", "__loader__",
        "__builtins__", "__cached__", "__annotations__", "__path__", "__module__",
        "__qualname__", "__class__", "__debug__",
    }
)  # fmt: skip
PROVIDED = frozenset(dir(builtins)) | IMPLICIT
NAME_ERROR_CATCHERS = frozenset({"NameError", "Exception", "BaseException"})
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class FreeName:
    name: str
    line: int  # where it is first read


@dataclass(frozen=True)
class FreeNames:
    decided: bool  # False: a star import, so any name might be defined
    names: tuple[FreeName, ...] = ()

    @property
    def free(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.names)


@dataclass(eq=False)
class _Scope:
    kind: str  # "module" | "class" | "function" | "comprehension"
    parent: _Scope | None
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)

    def module(self) -> _Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def binding(self) -> _Scope:
        """Where a walrus binds: the nearest scope that is not a comprehension."""
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope

    def bind(self, name: str) -> None:
        if name in self.declared_global:
            self.module().bound.add(name)
        else:
            self.bound.add(name)

    def resolves(self, name: str) -> bool:
        module = self.module()
        if name in PROVIDED or name in module.bound:
            return True
        if name in self.declared_global:
            return False
        if name in self.bound:
            return True
        scope = self.parent
        while scope is not None and scope.kind != "module":
            if scope.kind != "class" and name in scope.bound:  # class bodies do not enclose
                return True
            scope = scope.parent
        return False


@dataclass(frozen=True)
class _Read:
    name: str
    line: int
    scope: _Scope


class _Walker:
    def __init__(self, lazy_annotations: bool):
        self.lazy_annotations = lazy_annotations  # `from __future__ import annotations`
        self.reads: list[_Read] = []
        self.star = False

    # -- statements and expressions -------------------------------------------------------
    def visit(self, node: ast.AST, scope: _Scope, protected: bool = False) -> None:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is not None:
            method(node, scope, protected)
        else:
            self.children(node, scope, protected)

    def children(self, node: ast.AST, scope: _Scope, protected: bool) -> None:
        for child in ast.iter_child_nodes(node):
            self.visit(child, scope, protected)

    def _Name(self, node: ast.Name, scope: _Scope, protected: bool) -> None:
        if isinstance(node.ctx, ast.Load):
            if not protected:
                self.reads.append(_Read(node.id, node.lineno, scope))
        else:  # Store, Del
            scope.bind(node.id)

    def _NamedExpr(self, node: ast.NamedExpr, scope: _Scope, protected: bool) -> None:
        self.visit(node.value, scope, protected)
        scope.binding().bind(node.target.id)

    def _Import(self, node: ast.Import, scope: _Scope, protected: bool) -> None:
        for alias in node.names:
            scope.bind(alias.asname or alias.name.split(".")[0])

    def _ImportFrom(self, node: ast.ImportFrom, scope: _Scope, protected: bool) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.star = True
            else:
                scope.bind(alias.asname or alias.name)

    def _Global(self, node: ast.Global, scope: _Scope, protected: bool) -> None:
        scope.declared_global.update(node.names)

    def _Nonlocal(self, node: ast.Nonlocal, scope: _Scope, protected: bool) -> None:
        scope.bound.update(node.names)

    def _AnnAssign(self, node: ast.AnnAssign, scope: _Scope, protected: bool) -> None:
        self.visit(node.target, scope, protected)
        if node.value is not None:
            self.visit(node.value, scope, protected)
        if scope.kind != "function" and not self.lazy_annotations:  # evaluated there
            self.visit(node.annotation, scope, protected)

    def _Try(self, node: ast.Try, scope: _Scope, protected: bool) -> None:
        catches = any(_catches_name_error(h) for h in node.handlers)
        for stmt in node.body:
            self.visit(stmt, scope, protected or catches)
        for handler in node.handlers:
            if handler.type is not None:
                self.visit(handler.type, scope, protected)
            if handler.name:
                scope.bind(handler.name)
            for stmt in handler.body:
                self.visit(stmt, scope, protected)
        for stmt in [*node.orelse, *node.finalbody]:
            self.visit(stmt, scope, protected)

    _TryStar = _Try

    # -- patterns (match statements) ------------------------------------------------------
    def _MatchAs(self, node: ast.MatchAs, scope: _Scope, protected: bool) -> None:
        if node.name:
            scope.bind(node.name)
        self.children(node, scope, protected)

    def _MatchStar(self, node: ast.MatchStar, scope: _Scope, protected: bool) -> None:
        if node.name:
            scope.bind(node.name)

    def _MatchMapping(self, node: ast.MatchMapping, scope: _Scope, protected: bool) -> None:
        if node.rest:
            scope.bind(node.rest)
        self.children(node, scope, protected)

    # -- new scopes -----------------------------------------------------------------------
    def _signature(self, args: ast.arguments, scope: _Scope, protected: bool) -> None:
        """Defaults and annotations: read where the function is defined."""
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default, scope, protected)
        if self.lazy_annotations:
            return
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for arg in every:
            if arg is not None and arg.annotation is not None:
                self.visit(arg.annotation, scope, protected)

    def _body_scope(self, args: ast.arguments, node: ast.AST, parent: _Scope) -> _Scope:
        inner = _Scope("function", parent)
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        inner.bound.update(a.arg for a in every if a is not None)
        inner.bound.update(_type_params(node))
        return inner

    def _FunctionDef(self, node: ast.FunctionDef, scope: _Scope, protected: bool) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator, scope, protected)
        self._signature(node.args, scope, protected)
        if node.returns is not None and not self.lazy_annotations:
            self.visit(node.returns, scope, protected)
        scope.bind(node.name)
        inner = self._body_scope(node.args, node, scope)
        for stmt in node.body:  # runs when called: a try around the def does not cover it
            self.visit(stmt, inner)

    _AsyncFunctionDef = _FunctionDef

    def _Lambda(self, node: ast.Lambda, scope: _Scope, protected: bool) -> None:
        self._signature(node.args, scope, protected)
        self.visit(node.body, self._body_scope(node.args, node, scope))

    def _ClassDef(self, node: ast.ClassDef, scope: _Scope, protected: bool) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr, scope, protected)
        scope.bind(node.name)
        inner = _Scope("class", scope)
        inner.bound.update(_type_params(node))
        for stmt in node.body:
            self.visit(stmt, inner, protected)

    def _comprehension(self, node: ast.AST, scope: _Scope, protected: bool) -> None:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        self.visit(generators[0].iter, scope, protected)  # evaluated outside
        inner = _Scope("comprehension", scope)
        for i, gen in enumerate(generators):
            self.visit(gen.target, inner, protected)
            if i:
                self.visit(gen.iter, inner, protected)
            for cond in gen.ifs:
                self.visit(cond, inner, protected)
        parts = ("key", "value") if isinstance(node, ast.DictComp) else ("elt",)
        for part in parts:
            self.visit(getattr(node, part), inner, protected)

    _ListComp = _SetComp = _GeneratorExp = _DictComp = _comprehension


def _catches_name_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in NAME_ERROR_CATCHERS for t in types)


def _type_params(node: ast.AST) -> set[str]:
    params = getattr(node, "type_params", None) or []  # Python 3.12+
    return {p.name for p in params}


def _lazy_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def free_names(tree: ast.Module) -> FreeNames:
    """The names `tree` reads that it never binds and Python does not provide, each with
    the line of its first read, in the order of those lines."""
    walker = _Walker(_lazy_annotations(tree))
    module = _Scope("module", None)
    for stmt in tree.body:
        walker.visit(stmt, module)
    if walker.star:
        return FreeNames(decided=False)
    first: dict[str, int] = {}
    for read in walker.reads:
        if not read.scope.resolves(read.name):
            first[read.name] = min(first.get(read.name, read.line), read.line)
    names = sorted((FreeName(n, line) for n, line in first.items()), key=lambda f: f.line)
    return FreeNames(decided=True, names=tuple(names))


def module_bindings(stmt: ast.stmt) -> set[str]:
    """The module-level names one top-level statement binds."""
    walker = _Walker(lazy_annotations=True)
    module = _Scope("module", None)
    walker.visit(stmt, module)
    return module.bound
