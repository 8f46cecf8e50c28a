"""What each fx node means: functions, tensor methods and modules, mapped to converter calls.

Anything not in these tables is `unsupported: <name>`; nothing falls back to torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kforge_search.agents.builtin.convert import (
    Converter,
    DimOf,
    Indexed,
    Leaf,
    ShapeOf,
    T,
    kind_of,
    scalar,
)
from kforge_search.agents.builtin.dims import is_seg
from kforge_search.agents.builtin.ir import Kind, Scalar, UnsupportedError
from kforge_search.agents.builtin.trace import Traced, source_of

Handler = Callable[[Converter, Any, tuple[Any, ...], dict[str, Any]], Any]

UNARY = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "mish": "mish",
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "neg": "neg",
    "negative": "neg", "square": "square", "reciprocal": "reciprocal", "erf": "erf",
    "hardsigmoid": "hardsigmoid", "hardswish": "hardswish", "selu": "selu",
}  # fmt: skip
BINARY = {
    "add": "add", "iadd": "add", "sub": "sub", "isub": "sub", "subtract": "sub", "mul": "mul",
    "imul": "mul", "multiply": "mul", "truediv": "div", "itruediv": "div", "div": "div",
    "true_divide": "div", "divide": "div", "maximum": "maximum", "minimum": "minimum",
}  # fmt: skip
IDENTITY = {"contiguous", "clone", "detach", "float"}
VIEWS = {"view", "reshape", "unsqueeze", "squeeze", "flatten"}


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _tensor(value: Any, what: str) -> T:
    if not isinstance(value, T):
        raise UnsupportedError(what, "on an input or parameter before the GEMM")
    return value


def dims(value: Any) -> tuple[int, ...] | None:
    """A reduction's dims: one, several, or None for all of them."""
    if value is None or (isinstance(value, list | tuple) and not value):
        return None
    if isinstance(value, list | tuple):
        return tuple(int(v) for v in value)
    return (int(value),)


def _dim(value: Any) -> int:
    if isinstance(value, list | tuple):
        if len(value) != 1:
            raise UnsupportedError("reduction over several dims", str(value))
        value = value[0]
    if value is None:
        raise UnsupportedError("reduction over all dims")
    return int(value)


def _eps(value: Any) -> Scalar:
    return scalar(value)


# -- elementwise ------------------------------------------------------------------------------
def binary(cv: Converter, fn: str, a: Any, b: Any, alpha: Any = 1) -> Any:
    if (fn == "sub" and alpha != 1) or (fn == "add" and alpha != 1):
        b = cv.ew("mul", b, alpha) if isinstance(b, T | Leaf) else b * alpha
    return cv.ew(fn, a, b)


def clamp(cv: Converter, x: Any, lo: Any, hi: Any) -> T:
    if lo is not None:
        x = cv.ew("maximum", x, lo)
    if hi is not None:
        x = cv.ew("minimum", x, hi)
    return _tensor(x, "clamp")


def power(cv: Converter, x: Any, exponent: Any) -> Any:
    if isinstance(exponent, T | Leaf):
        raise UnsupportedError("pow with a tensor exponent")
    table = {2.0: ("square",), 0.5: ("sqrt",), -1.0: ("reciprocal",), -0.5: ("rsqrt",)}
    if float(exponent) == 1.0:
        return x
    if float(exponent) == 3.0:
        return cv.ew("mul", cv.ew("square", x), x)
    if float(exponent) not in table:
        raise UnsupportedError("pow", f"exponent {exponent}")
    return cv.ew(table[float(exponent)][0], x)


def gelu(cv: Converter, x: Any, approximate: str) -> T:
    return cv.ew("gelu_tanh" if approximate == "tanh" else "gelu", x)


def softplus(cv: Converter, x: Any, beta: Any, threshold: Any) -> T:
    if float(beta) != 1.0 or float(threshold) != 20.0:
        raise UnsupportedError("softplus", "only beta=1, threshold=20")
    return cv.ew("softplus", x)


# -- views ------------------------------------------------------------------------------------
def reshape(cv: Converter, node: Any, x: Any, shape_args: tuple[Any, ...]) -> Any:
    if isinstance(x, Leaf):
        new = tuple(node.meta["tensor_meta"].shape)
        if [n for n in new if n != 1] != [n for n in x.shape if n != 1] or x.transposed:
            raise UnsupportedError("reshaping an input or parameter in forward", x.expr)
        return Leaf(x.expr, new)  # size-1 dims only: the same elements in the same order
    x = _tensor(x, "view")
    new = tuple(node.meta["tensor_meta"].shape)
    if len(shape_args) == 1 and isinstance(shape_args[0], list | tuple):
        shape_args = tuple(shape_args[0])
    old = [(t, s) for t, s in zip(x.dims, x.shape, strict=True) if t != 1]
    sizes = [s for _, s in old]
    positions = [i for i, s in enumerate(new) if s != 1]
    kept = [new[i] for i in positions]
    tokens: list[str | int]
    if kept == sizes:
        tokens = [t for t, _ in old]
    elif split := _split(old, kept, sizes):
        arg = shape_args[positions[-split]] if positions[-split] < len(shape_args) else None
        if not isinstance(arg, int) or isinstance(arg, bool) or arg != kept[-split]:
            raise UnsupportedError("view into segments", "the segment count must be an int")
        pieces = tuple(kept[len(kept) - split + 1 :])
        groups = Scalar(float(arg), source_of(arg))
        tokens = [t for t, _ in old[:-1]] + list(cv.segments(groups, pieces))
    elif merged := _merged(old, kept, sizes):
        tokens = [t for t, _ in old[:-merged]] + ["C"]
    else:
        raise UnsupportedError("view", f"{x.shape} -> {new}")
    it = iter(tokens)
    dims = tuple(1 if s == 1 else next(it) for s in new)
    return T(x.id, dims, new, x.space, x.stage)


def _split(old: list[tuple[Any, int]], kept: list[int], sizes: list[int]) -> int:
    """How many dims the columns are viewed as (segments, then a segment's dims), or 0."""
    extra = len(kept) - len(sizes)
    if not old or old[-1][0] != "C" or extra < 1 or kept[: len(sizes) - 1] != sizes[:-1]:
        return 0
    return extra + 1 if math.prod(kept[len(sizes) - 1 :]) == sizes[-1] else 0


def _merged(old: list[tuple[Any, int]], kept: list[int], sizes: list[int]) -> int:
    """How many trailing dims (segments, then a segment's dims) merge back into the
    columns, or 0."""
    tail = [t for t, _ in old]
    n = len(tail) - tail.index("G") if "G" in tail else 0
    if n < 2 or not all(is_seg(t) for t in tail[-n + 1 :]):
        return 0
    if kept[:-1] != sizes[:-n] or kept[-1] != math.prod(sizes[-n:]):
        return 0
    return n


def transpose(x: Any, d0: int, d1: int) -> Leaf:
    if not isinstance(x, Leaf) or x.transposed:
        raise UnsupportedError("transpose of a computed value")
    rank = len(x.shape)
    if {d0 % rank, d1 % rank} != {rank - 2, rank - 1}:
        raise UnsupportedError("transpose", f"dims {d0}, {d1}")
    return Leaf(x.expr, (*x.shape[:-2], x.shape[-1], x.shape[-2]), True)


def triangle(cv: Converter, fn: str, x: Any, diagonal: Any) -> T:
    """torch.triu / torch.tril of a computed [..., rows, cols] value: a select on each
    element's row (within its matrix) and column, correct for any input."""
    x = _tensor(x, fn)
    if len(x.dims) < 2 or x.dims != (*cv.lead, "C") or kind_of(x.dims, cv.lead) is not Kind.MAT:
        raise UnsupportedError(fn, f"only of a [..., rows, cols] value, not of dims {x.dims}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise UnsupportedError(fn, f"diagonal {diagonal!r}: an int")
    period = Scalar(float(x.shape[-2]), "lead[-1]")  # rows per matrix (the forward's lead)
    return cv.ew(fn, x, scalar(diagonal), period)


# -- GEMMs ------------------------------------------------------------------------------------
def matmul(cv: Converter, a: Any, b: Any, batched: bool = False) -> T:
    if not isinstance(b, Leaf):
        raise UnsupportedError("matmul with a computed right operand")
    if len(b.shape) == 1 or len(a.shape) == 1:
        raise UnsupportedError("matmul with a 1-D operand", f"{a.shape} @ {b.shape}")
    a_rank = len(a.shape)
    if len(b.shape) == 3:
        if a_rank != 3 or b.shape[0] != a.shape[0]:
            raise UnsupportedError("batched matmul", f"{a.shape} @ {b.shape}")
        batched = True
    elif len(b.shape) != 2:
        raise UnsupportedError("matmul", f"right operand of shape {b.shape}")
    elif batched:
        raise UnsupportedError("bmm with a 2-D operand")
    # one output column, A an input and the program's first op (a stage of its own)
    column = isinstance(a, Leaf) and len(a.shape) == 2 and b.shape[-1] == 1
    if column and not batched and cv.stage < 0 and not a.transposed:
        return _matvec(cv, cv.anchor(a, first=1), b)
    # b.shape is [K, N] as seen by the matmul; a transposed leaf is stored [N, K]
    layout = "nk" if b.transposed else "kn"
    stored = Leaf(b.expr, (*b.shape[:-2], b.shape[-1], b.shape[-2])) if b.transposed else b
    return cv.gemm(a, stored, layout, batched)


def _matvec(cv: Converter, a: Any, b: Leaf) -> T:
    """A @ b with one output column: each row of A times b, summed (a row pass; its sums
    accumulate in double precision). As a GEMM it padded the one column to a tile of 16 to
    64 for the tensor cores and did that much more work (H200, 4_Matrix_vector, K = 2**20:
    0.68x of compile); this reads A once, at its memory bound, exact to the last sum."""
    k = b.shape[0]
    row = Leaf(b.expr, (1, k))  # its K values in order, either way it is stored ([K, 1], [1, K])
    return cv.reduce("sum", cv.ew("mul", a, row), (-1,), True)


def einsum(cv: Converter, equation: Any, *operands: Any) -> T:
    """A two-operand einsum that is a GEMM: one index contracted, last (or second to last:
    a transposed operand) in the left operand's matrix dims, either of the right's; an
    optional batch index first in both and in the output; the output's indices are the left
    operand's free ones, then the right's, in order."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise UnsupportedError("einsum", "the equation must be a string")
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise UnsupportedError("einsum", f"{equation!r}: an ellipsis")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2 or len(operands) != 2:
        raise UnsupportedError("einsum", f"{equation!r}: only two operands (a GEMM)")
    sa, sb = terms
    if not arrow:  # implicit output: the indices seen once, in alphabetical order
        out = "".join(sorted(c for c in set(sa + sb) if (sa + sb).count(c) == 1))
    a, b = operands
    for term, x in ((sa, a), (sb, b)):
        if len(set(term)) != len(term) or len(term) != len(getattr(x, "shape", ())):
            raise UnsupportedError("einsum", f"{equation!r}: a repeated index or a rank mismatch")
    shared = [c for c in sa if c in sb]
    contracted = [c for c in shared if c not in out]
    batch = [c for c in shared if c in out]
    if len(contracted) != 1 or any(c not in out and c not in shared for c in sa + sb):
        raise UnsupportedError("einsum", f"{equation!r}: not one contracted index (a GEMM)")
    k = contracted[0]
    lead = "".join(batch)
    if batch and (len(batch) != 1 or not (sa[0] == sb[0] == out[0] == batch[0])):
        raise UnsupportedError("einsum", f"{equation!r}: a batch index not first everywhere")
    if batch and (len(sa) != 3 or len(sb) != 3):
        raise UnsupportedError("einsum", f"{equation!r}: batched operands must be 3-D")
    if not batch and len(sb) != 2:
        raise UnsupportedError("einsum", f"{equation!r}: the right operand must be 2-D")
    if len(sa) < 2:
        raise UnsupportedError("einsum", f"{equation!r}: the left operand must be 2-D or more")
    if sa[-1] != k:
        if sa[-2] != k:
            raise UnsupportedError("einsum", f"{equation!r}: the contracted index inside A")
        a, sa = transpose(a, -2, -1), sa[:-2] + sa[-1] + sa[-2]
    if sb[len(lead)] != k:
        b, sb = transpose(b, -2, -1), sb[:-2] + sb[-1] + sb[-2]
    if out != sa[:-1] + sb[-1]:
        raise UnsupportedError("einsum", f"{equation!r}: output indices not in GEMM order")
    return matmul(cv, a, b, batched=bool(batch))


def linear(cv: Converter, x: Any, weight: Any, bias: Any) -> T:
    if not isinstance(weight, Leaf) or weight.transposed or len(weight.shape) != 2:
        raise UnsupportedError("linear with a computed weight")
    out = cv.gemm(x, weight, "nk")
    return cv.ew("add", out, bias) if bias is not None else out


def run_graph(cv: Converter, traced: Traced) -> Any:
    from kforge_search.agents.builtin.dispatch import dispatch

    env: dict[Any, Any] = {}
    gm = traced.graph_module
    for node in gm.graph.nodes:
        args = _map(node.args, env)
        kwargs = {k: _map_one(v, env) for k, v in node.kwargs.items()}
        if node.op == "placeholder":
            meta = node.meta.get("tensor_meta")
            # a number passed to forward (KernelBench's `A * s`) is read there at run time
            number = traced.scalar_inputs.get(node.target)
            if meta is not None:
                env[node] = Leaf(node.target, tuple(meta.shape))
            else:  # an optional argument get_inputs leaves out is its default (None)
                env[node] = None if number is None else Scalar(number, node.target)
        elif node.op == "get_attr":
            env[node] = _attribute(traced, node.target)
        elif node.op == "output":
            out = args[0]
            if isinstance(out, list | tuple):
                raise UnsupportedError("multiple outputs")
            return out
        else:
            env[node] = dispatch(cv, node, args, kwargs, gm)
    raise UnsupportedError("a graph without an output")


def _attribute(traced: Traced, target: str) -> Leaf:
    import torch

    try:
        value = traced.model.get_parameter(target)
    except AttributeError:
        try:
            value = traced.model.get_buffer(target)
        except AttributeError:
            raise UnsupportedError("a tensor constant created in forward", target) from None
    assert isinstance(value, torch.Tensor)
    return Leaf(f"self.{target}", tuple(value.shape))


def _map_one(value: Any, env: dict[Any, Any]) -> Any:
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return env[value]
    if isinstance(value, list | tuple):
        return type(value)(_map_one(v, env) for v in value)
    return value


def _map(args: tuple[Any, ...], env: dict[Any, Any]) -> tuple[Any, ...]:
    return tuple(_map_one(a, env) for a in args)


def shape_item(value: Any, index: Any) -> Any:
    if isinstance(value, ShapeOf):
        return DimOf(value.dims[index], value.sizes[index])
    if isinstance(value, Indexed):
        if index != 0:
            raise UnsupportedError("argmax/argmin indices")
        return value.values
    if isinstance(value, tuple):
        return value[index]
    raise UnsupportedError("indexing a tensor")


def attribute_of(value: Any, name: str) -> Any:
    if isinstance(value, T) and name == "shape":
        return ShapeOf(value.dims, value.shape)
    if isinstance(value, Leaf) and name == "shape":
        raise UnsupportedError("the shape of an input or parameter")
    if isinstance(value, Indexed) and name == "values":
        return value.values
    if isinstance(value, Leaf) and name in ("T", "mT"):
        return transpose(value, -2, -1)
    raise UnsupportedError(f"attribute {name}")
