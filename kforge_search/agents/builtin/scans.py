"""Scans along the columns (cumsum, cumprod) and the shapes that make their other forms.

flip, scan, flip along the columns is a reverse scan (an exact rewrite: the same sums in
the same order); cat((zeros_like(x.select(d, 0).unsqueeze(d)), cumsum(x.narrow(d, 0,
x.size(d) - 1), d)), d) is an exclusive scan (each output without its own element). Each
piece on the way is a value of its own here (a flipped tensor, a narrowed one, the tail of
an exclusive scan, a shape to fill) that only the next piece of that form accepts, checked
on the fx node's users; anything else is `unsupported` with the form it must take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kforge_search.agents.builtin import handlers as h
from kforge_search.agents.builtin.convert import Converter, DimOf, Leaf, T, kind_of
from kforge_search.agents.builtin.dims import canonical, is_seg
from kforge_search.agents.builtin.ir import Kind, Scan, UnsupportedError

IDENTITY = {"sum": 0.0, "prod": 1.0}
SCANS = {"cumsum": "sum", "cumprod": "prod"}
EXCLUSIVE_FORM = (
    "only an exclusive scan: cat((zeros_like(x.select(d, 0).unsqueeze(d)), "
    "cumsum(x.narrow(d, 0, x.size(d) - 1), d)), d) along the last dim"
)
REVERSE_FORM = "only flip, scan, flip along the last dim (a reverse scan)"


@dataclass(frozen=True)
class Extent:
    """A dim's size minus `minus`, known at run time: dim `dim` of the input `leaf`, or the
    dim `token` of a computed value."""

    size: int  # at the traced sizes
    minus: int = 0
    leaf: str = ""
    dim: int = -1
    token: str | int = ""


@dataclass(frozen=True)
class Flipped:
    """`t` reversed along its dim `dim` (the columns)."""

    t: T
    dim: int


@dataclass(frozen=True)
class Narrowed:
    """`t` without its last column (x.narrow(d, 0, n - 1) along the columns)."""

    t: T
    dim: int


@dataclass(frozen=True)
class ScanTail:
    """The exclusive scan `t` without its first column: a scan of a narrowed value."""

    t: T
    fn: str
    dim: int


@dataclass(frozen=True)
class Shaped:
    """A value known by its shape alone (x.select(d, 0)): what zeros_like needs."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class Filled:
    """zeros_like / ones_like of a value: `value` in the fx node's shape."""

    value: float
    shape: tuple[int, ...]


def _name(node: Any) -> str:
    return str(node.target if node.op == "call_method" else getattr(node.target, "__name__", ""))


def _used_only_by(node: Any, names: set[str], op: str, why: str) -> None:
    """Refuse `op` unless every user of the fx node is a call to one of `names`."""
    for user in node.users:
        if user.op not in ("call_function", "call_method") or _name(user) not in names:
            raise UnsupportedError(op, why)


def _shape(node: Any) -> tuple[int, ...]:
    return tuple(node.meta["tensor_meta"].shape)


def _tile(cv: Converter, x: Any, op: str) -> Any:
    """A computed value, or an input that is the current stage's tile."""
    if isinstance(x, Leaf):
        tile = cv.anchored.get(x.expr)
        if tile is None or tile.shape != x.shape or x.transposed:
            raise UnsupportedError(op, f"of the input {x.expr} after the program's first op")
        return tile
    return x


def _columns(cv: Converter, x: T, dim: Any, op: str) -> int:
    """`dim` as an index of x's dims, when it is the columns (the last dim that is not 1)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise UnsupportedError(op, f"along dim {dim!r}: a constant dim is needed")
    d = dim % len(x.dims)
    if kind_of(x.dims, cv.lead) is not Kind.MAT or not canonical(x.dims):
        raise UnsupportedError(op, f"of a value with dims {x.dims}")
    last = max(i for i, t in enumerate(x.dims) if t != 1)
    if d != last or x.dims[d] != "C" or any(is_seg(t) or t == "G" for t in x.dims):
        raise UnsupportedError(op, f"along dim {dim} of shape {x.shape}: only along the last dim")
    return d


def _scan(cv: Converter, fn: str, x: T, dim: int, reverse: bool, exclusive: bool) -> T:
    cv.tail_ops += float(_numel(x.shape))
    node_id = cv._add(lambda i: Scan(i, Kind.MAT, fn, x.id, reverse, exclusive, x.space))
    return T(node_id, x.dims, x.shape, x.space, x.stage)


def scan(cv: Converter, node: Any, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """cumsum / cumprod: of a value, of a flipped one (reverse) or of a narrowed one (the
    tail of an exclusive scan)."""
    import torch

    fn = SCANS[op]
    dtype = kw.get("dtype")
    if dtype is not None and dtype != torch.float32:
        raise UnsupportedError(f"{op} with dtype {dtype}")
    x = _tile(cv, args[0], op)
    dim = h._arg(args, kw, 1, "dim", None)
    if isinstance(x, Flipped):
        _columns(cv, x.t, dim, op)
        if dim % len(x.t.dims) != x.dim:
            raise UnsupportedError(op, f"along another dim than its input's flip: {REVERSE_FORM}")
        _used_only_by(node, {"flip", *SCANS}, op, f"of a flipped value: {REVERSE_FORM}")
        return Flipped(_scan(cv, fn, x.t, x.dim, True, False), x.dim)
    if isinstance(x, Narrowed):
        _columns(cv, x.t, dim, op)
        if dim % len(x.t.dims) != x.dim:
            raise UnsupportedError(op, f"along another dim than the narrowing: {EXCLUSIVE_FORM}")
        _used_only_by(node, {"cat"}, op, f"of a narrowed value: {EXCLUSIVE_FORM}")
        return ScanTail(_scan(cv, fn, x.t, x.dim, False, True), fn, x.dim)
    if not isinstance(x, T):
        raise UnsupportedError(op, f"of {type(x).__name__}")
    if isinstance(dim, int) and not isinstance(dim, bool) and x.dims[dim % len(x.dims)] == 1:
        return x  # a running total over one element is that element
    d = _columns(cv, x, dim, op)
    return _scan(cv, fn, x, d, False, False)


def flip(cv: Converter, node: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    dims = kw.get("dims", args[1:])
    flat: list[Any] = []
    for d in dims if isinstance(dims, list | tuple) else (dims,):
        flat.extend(d if isinstance(d, list | tuple) else (d,))
    if len(flat) != 1:
        raise UnsupportedError("flip", f"over dims {flat}: {REVERSE_FORM}")
    x = _tile(cv, args[0], "flip")
    if isinstance(x, Flipped):
        t = x.t
        if flat[0] % len(t.dims) != x.dim:
            raise UnsupportedError("flip", f"over two dims: {REVERSE_FORM}")
        return t  # flipped twice: as it was
    if not isinstance(x, T):
        raise UnsupportedError("flip", f"of {type(x).__name__}: {REVERSE_FORM}")
    d = _columns(cv, x, flat[0], "flip")
    _used_only_by(node, {"flip", *SCANS}, "flip", REVERSE_FORM)
    return Flipped(x, d)


def narrow(cv: Converter, node: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Narrowed:
    x = _tile(cv, args[0], "narrow")
    if not isinstance(x, T):
        raise UnsupportedError("narrow", f"of {type(x).__name__}: {EXCLUSIVE_FORM}")
    dim = h._arg(args, kw, 1, "dim", None)
    start = h._arg(args, kw, 2, "start", None)
    length = h._arg(args, kw, 3, "length", None)
    d = _columns(cv, x, dim, "narrow")
    if isinstance(start, bool) or start != 0:
        raise UnsupportedError("narrow", f"from {start!r}: {EXCLUSIVE_FORM}")
    if not _all_but_last(cv, x, d, length):
        raise UnsupportedError("narrow", f"to length {length!r}: {EXCLUSIVE_FORM}")
    _used_only_by(node, set(SCANS), "narrow", EXCLUSIVE_FORM)
    return Narrowed(x, d)


def _all_but_last(cv: Converter, x: T, d: int, length: Any) -> bool:
    """Whether `length` is x's size along d minus one at run time (not only at these sizes)."""
    if not isinstance(length, Extent) or length.minus != 1:
        return False
    if length.token:
        return length.token == x.dims[d]
    tile = cv.anchored.get(length.leaf)
    return tile is not None and tile.id == x.id and length.dim == d


def select(node: Any, args: tuple[Any, ...]) -> Shaped:
    """x.select(d, i) as its shape: only for zeros_like / ones_like (through views)."""
    from kforge_search.agents.builtin.handlers import VIEWS

    _used_only_by(node, {"zeros_like", "ones_like", *VIEWS}, "select", EXCLUSIVE_FORM)
    return Shaped(_shape(node))


def filled(node: Any, value: float, kw: dict[str, Any]) -> Filled:
    import torch

    dtype = kw.get("dtype")
    if dtype is not None and dtype != torch.float32:
        raise UnsupportedError("zeros_like", f"with dtype {dtype}")
    name = "zeros_like" if value == 0.0 else "ones_like"
    _used_only_by(node, {"cat"}, name, EXCLUSIVE_FORM)
    return Filled(value, _shape(node))


def cat(node: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> T:
    parts = h._arg(args, kw, 0, "tensors", ())
    dim = h._arg(args, kw, 1, "dim", 0)
    if not isinstance(parts, list | tuple) or len(parts) != 2:
        raise UnsupportedError("cat", EXCLUSIVE_FORM)
    head, tail = parts
    if not isinstance(head, Filled) or not isinstance(tail, ScanTail):
        raise UnsupportedError("cat", EXCLUSIVE_FORM)
    t = tail.t
    if isinstance(dim, bool) or not isinstance(dim, int) or dim % len(t.shape) != tail.dim:
        raise UnsupportedError("cat", f"along dim {dim!r}: {EXCLUSIVE_FORM}")
    one = tuple(1 if i == tail.dim else n for i, n in enumerate(t.shape))
    if head.value != IDENTITY[tail.fn] or head.shape != one or _shape(node) != t.shape:
        raise UnsupportedError("cat", f"of {head.value} in shape {head.shape}: {EXCLUSIVE_FORM}")
    return t


def size(args: tuple[Any, ...], kw: dict[str, Any], base: Callable[..., Any]) -> Any:
    """x.size(d) of an input: its size, known to be that dim's (for narrow)."""
    x, dim = args[0], h._arg(args, kw, 1, "dim", None)
    if isinstance(x, Leaf) and isinstance(dim, int) and not x.transposed:
        d = dim % len(x.shape)
        return Extent(x.shape[d], 0, x.expr, d)
    return base()


def arith(fn: str, a: Any, b: Any, base: Callable[..., Any]) -> Any:
    """A size plus or minus an int, as an Extent; anything else as before."""
    sizes = (Extent, DimOf)
    if not isinstance(a, sizes) or isinstance(b, bool) or not isinstance(b, int):
        return base()
    if isinstance(a, DimOf):
        a = Extent(a.size, 0, token=a.token)
    step = b if fn == "sub" else -b
    return Extent(a.size - step, a.minus + step, a.leaf, a.dim, a.token)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def funcs(base: dict[str, Any]) -> dict[str, Any]:
    """The handlers of this module's targets, and those it wraps in `base` (sizes, views):
    a value of this module goes here, any other to the handler it had."""

    def viewed(name: str) -> Any:
        original = base[name]  # taken now: `base` is updated with these wrappers

        def run(cv: Converter, nd: Any, a: Any, k: Any) -> Any:
            if a and isinstance(a[0], Shaped):
                return Shaped(_shape(nd))
            return original(cv, nd, a, k)

        return run

    def shifted(name: str, fn: str) -> Any:
        original = base[name]
        return lambda cv, nd, a, k: arith(fn, a[0], a[1], lambda: original(cv, nd, a, k))

    views = {n: viewed(n) for n in h.VIEWS if n in base}
    sums = {n: shifted(n, fn) for n, fn in h.BINARY.items() if fn in ("add", "sub")}
    return {
        **views,
        **sums,
        **{n: (lambda op: lambda cv, nd, a, k: scan(cv, nd, op, a, k))(n) for n in SCANS},
        "flip": lambda cv, nd, a, k: flip(cv, nd, a, k),
        "narrow": lambda cv, nd, a, k: narrow(cv, nd, a, k),
        "select": lambda cv, nd, a, k: select(nd, a),
        "zeros_like": lambda cv, nd, a, k: filled(nd, 0.0, k),
        "ones_like": lambda cv, nd, a, k: filled(nd, 1.0, k),
        "cat": lambda cv, nd, a, k: cat(nd, a, k),
        "size": lambda cv, nd, a, k: size(a, k, lambda: base["size"](cv, nd, a, k)),
    }
