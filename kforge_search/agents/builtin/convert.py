"""torch.fx graph -> IR. The converter keeps the values; handlers.py maps each fx target.

Tensor values carry dims tokens (see ir.Graph.out_dims), which make broadcasting exact:
a [R, 1] row statistic plus a [C] bias is a [R, C] matrix, while a [R] row statistic plus a
[C] vector is refused even when R == C at the traced sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kforge_search.agents.builtin.dims import Dims, canonical, is_col, is_seg
from kforge_search.agents.builtin.ir import (
    Arg,
    Ew,
    Gemm,
    Graph,
    Kind,
    Load,
    Node,
    Pool,
    Scalar,
    Size,
    Stat,
    Unsupported,
    UnsupportedError,
    Update,
    Window,
    Work,
)
from kforge_search.agents.builtin.split import columns_from
from kforge_search.agents.builtin.trace import Traced, source_of


@dataclass(frozen=True)
class T:
    """A computed tensor: the IR node `id`, its dims tokens and traced shape."""

    id: int
    dims: Dims
    shape: tuple[int, ...]
    space: int  # 0: GEMM columns, 1: pooled columns (of stage `stage`)
    stage: int


@dataclass(frozen=True)
class Leaf:
    """An input or a parameter, given a kind when it meets a computed tensor."""

    expr: str
    shape: tuple[int, ...]
    transposed: bool = False
    swap_of: str = ""  # the input whose view (dims 0 and 1 swapped) `expr` is: desugar.swap_lead


@dataclass(frozen=True)
class ShapeOf:
    dims: Dims
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class DimOf:
    token: str | int
    size: int


@dataclass(frozen=True)
class Indexed:
    """The (values, indices) result of max/min with a dim: only values is supported."""

    values: Any


def kind_of(dims: Dims, lead: Dims) -> Kind:
    tokens = [t for t in dims if t != 1]
    leads = [t for t in tokens if isinstance(t, str) and t.startswith("L")]
    has_cols = any(is_col(t) for t in tokens)
    if len(lead) > 1 and has_cols and tuple(sorted(leads)) == lead[:-1]:
        return Kind.BCOL  # per column of each batch: the last leading dim reduced
    if leads and tuple(sorted(leads)) != lead:
        raise UnsupportedError("broadcast over part of the leading dims", str(dims))
    if any(is_seg(t) for t in tokens) and "G" not in tokens:
        raise UnsupportedError("broadcast along a segment", str(dims))
    has_c = any(is_col(t) or is_seg(t) for t in tokens)
    if leads:
        return Kind.MAT if has_c else (Kind.SEG if "G" in tokens else Kind.ROW)
    if has_c:
        return Kind.COL
    return Kind.SEGVEC if "G" in tokens else Kind.ONE


def broadcast(a: Dims, b: Dims) -> Dims:
    out: list[str | int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise UnsupportedError("broadcast", f"dims {a} against {b}")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def scalar(value: Any) -> Scalar:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedError("non-numeric constant", repr(value))
    return Scalar(float(value), source_of(value))


class Converter:
    def __init__(self, traced: Traced):
        self.traced = traced
        self.nodes: list[Node] = []
        self.lead: Dims = ()
        self.stage = -1
        self.space = 0
        self.groups: Scalar | None = None
        self.gemm_sizes: list[tuple[int, int, int, int]] = []
        self.tail_ops = 0.0
        self.read: dict[str, int] = {}  # leaf expression -> elements read
        self.updates: list[Update] = []  # buffers the forward updates in place
        self.token_size: dict[str, int] = {}  # the current space's dims tokens -> traced size
        self.anchored: dict[str, T] = {}  # an input read as the current stage's tile
        self.cols_from = -1  # the first stage's anchor input: its columns from this dim
        self.space_ref: T | None = None  # the current stage's tile: leaves align against it
        self.totals: set[int] = set()  # statistics of all of the space, and values of them
        self.col_sizes: tuple[str, ...] = ()  # see Graph.col_sizes
        self.out_shape = ""  # the output's shape as a forward expression, where a view says
        self.out_of_shape = -1  # the node it is of (only the program's output takes it)
        self.indices: set[int] = set()  # argmax / argmin results (int64 as an output)

    # -- building nodes --------------------------------------------------------------------
    def _add(self, make: Any) -> int:
        node_id = len(self.nodes)
        self.nodes.append(make(node_id))
        return node_id

    def leaf(self, leaf: Leaf, dims: Dims, ref: T | None = None) -> T:
        self.read[leaf.expr] = _numel(leaf.shape)  # what must move (not an expanded copy)
        try:
            kind = kind_of(dims, self.lead)
        except UnsupportedError:
            expanded = self._expanded(leaf, dims)
            if expanded is None:
                raise
            leaf, dims = expanded
            kind = kind_of(dims, self.lead)
        space = ref.space if ref else self.space
        inner = self._inner(leaf, dims, kind)
        node_id = self._add(lambda i: Load(i, kind, leaf.expr, space, inner))
        return T(node_id, dims, leaf.shape, space, self.stage)

    def _expanded(self, leaf: Leaf, dims: Dims) -> tuple[Leaf, Dims] | None:
        """A leaf broadcast along some leading dims but not others (a [S, C] table beside
        [B, S, C], or [B, 1, 1, C] beside [B, S, T, C]), as the first stage's view of it
        expanded to every leading dim (a copy the forward makes; each row then its own):
        None where it is not such a leaf (a later stage's `lead` is not the forward's)."""
        if self.stage != 0 or self.space_ref is None:
            return None
        ncols = len(self.space_ref.dims) - len(self.lead)
        k = len(dims) - ncols  # the leaf's leading positions (right-aligned)
        leads = [t for t in dims[: max(k, 0)] if t != 1]
        if (
            k <= 0
            or not set(leads) <= set(self.lead)
            or any(isinstance(t, str) and t.startswith("L") for t in dims[k:])
        ):
            return None
        sizes = tuple(self.token_size[t] for t in self.lead)
        expr = f"{leaf.expr}.expand(*lead, *{leaf.expr}.shape[{k}:])"
        return Leaf(expr, (*sizes, *leaf.shape[k:])), (*self.lead, *dims[k:])

    def _inner(self, leaf: Leaf, dims: Dims, kind: Kind) -> int:
        """Where the columns are several tokens (C, C1, ...), a leaf over some of them only:
        a per-column vector over the first ones, broadcast along the rest (a per-channel
        vector (C, 1, 1) of [C, H, W] columns), is read at column // their size (Load.inner);
        any other leaf must have all the columns or none."""
        cols = [t for t in self.token_size if is_col(t)]
        have = [t for t in dims if is_col(t)]
        if not have or have == cols:
            return 0
        if kind is Kind.COL and have == cols[: len(have)]:
            return len(cols) - len(have)
        raise UnsupportedError(
            "broadcast", f"{leaf.expr} with dims {dims}: along some of the columns {tuple(cols)}"
        )

    def align(self, leaf: Leaf, ref: T) -> T:
        """A leaf's dims by right-aligning its shape with `ref` (numpy broadcasting). Where
        `ref` has size 1 (a statistic kept as [B, 1]) or no dim at all, the leaf's size names
        the dim: the one dim of the GEMM's space with that size that `ref` lacks."""
        tile = self.anchored.get(leaf.expr)
        if tile is not None and tile.shape == leaf.shape and tile.stage == self.stage:
            return tile  # the stage's own tile: read once
        if leaf.transposed:
            raise UnsupportedError("transposed tensor in an elementwise op", leaf.expr)
        dims: list[str | int] = []
        for i in range(1, len(leaf.shape) + 1):
            size = leaf.shape[-i]
            if size == 1:
                dims.append(1)
            elif i <= len(ref.shape) and ref.shape[-i] == size and ref.dims[-i] != 1:
                dims.append(ref.dims[-i])
            elif i <= len(ref.shape) and ref.shape[-i] != 1:
                raise UnsupportedError(
                    "broadcast", f"{leaf.expr} of shape {leaf.shape} against {ref.shape}"
                )
            else:
                dims.append(self._token_of_size(leaf, size, (*ref.dims, *dims)))
        out = tuple(reversed(dims))
        try:
            kind: Kind | None = kind_of(out, self.lead)
        except UnsupportedError:
            kind = None  # some leading dims only: leaf() expands it, or says why not
        if kind in (Kind.MAT, Kind.SEG) and not canonical(out):
            raise UnsupportedError(
                "broadcast",
                f"{leaf.expr} of shape {leaf.shape}: a "
                "tensor whose dims are in another order than the GEMM's",
            )
        return self.leaf(leaf, out, ref)

    def _token_of_size(self, leaf: Leaf, size: int, taken: Dims) -> str:
        found = [t for t, n in self.token_size.items() if n == size and t not in taken]
        if len(found) != 1:
            why = "no dim of the GEMM's output" if not found else f"several dims ({found})"
            raise UnsupportedError(
                "broadcast", f"{leaf.expr} of shape {leaf.shape}: size {size} matches {why}"
            )
        return found[0]

    def ew(self, fn: str, *args: Any) -> T:
        tensors = [a for a in args if isinstance(a, T)]
        if not tensors:
            leaves = [a for a in args if isinstance(a, Leaf)]
            if not leaves or self.space_ref is None:
                raise UnsupportedError(fn, "on inputs or parameters alone, before the GEMM")
            first = max(leaves, key=lambda leaf: _numel(leaf.shape))
            tensors = [self.align(first, self.space_ref)]
            args = tuple(tensors[0] if a is first else a for a in args)
        if any(t.id in self.totals for t in tensors):
            again = self._reanchored(fn, args, tensors)
            if again is not None:
                return again
        ref = tensors[0]
        for t in tensors[1:]:
            ref = T(ref.id, broadcast(ref.dims, t.dims), _bshape(ref, t), ref.space, ref.stage)
        resolved: list[Arg] = []
        for a in args:
            if isinstance(a, Leaf):
                a = self.align(a, ref)
                ref = T(ref.id, broadcast(ref.dims, a.dims), _bshape(ref, a), ref.space, ref.stage)
            resolved.append(
                a.id if isinstance(a, T) else a if isinstance(a, Size | Scalar) else scalar(a)
            )
        if len({t.stage for t in tensors}) > 1 and kind_of(ref.dims, self.lead) is not Kind.MAT:
            raise UnsupportedError(fn, "mixing values of two GEMM stages")
        kind = kind_of(ref.dims, self.lead)
        self.tail_ops += _numel(ref.shape)
        node_id = self._add(lambda i: Ew(i, kind, fn, tuple(resolved), ref.space))
        if any(t.id in self.totals for t in tensors):
            self.totals.add(node_id)
        return T(node_id, ref.dims, ref.shape, ref.space, max(t.stage for t in tensors))

    def _reanchored(self, fn: str, args: tuple[Any, ...], tensors: list[T]) -> T | None:
        """A value over the whole space after a statistic of all of it (x / norm(x)): the
        statistic needs every row first, so a new stage anchored by nothing walks the space
        again; its tile is the input read again, or the value an earlier stage stored."""
        after = max(t.stage for t in tensors if t.id in self.totals)
        spread = [
            t for t in tensors if t.id not in self.totals and kind_of(t.dims, self.lead) is Kind.MAT
        ]
        spread += [
            self.anchored[a.expr]
            for a in args
            if isinstance(a, Leaf) and a.expr in self.anchored
            and self.anchored[a.expr].shape == a.shape
        ]  # fmt: skip
        if not spread or all(t.stage > after for t in spread):
            return None
        if len({t.id for t in spread}) > 1:
            raise UnsupportedError(fn, "two values over the space after a statistic of all of it")
        self._no_stage_after_swap(fn)
        old = spread[0]
        inputs = [e for e, t in self.anchored.items() if t.id == old.id]
        source: int | str = inputs[0] if inputs else old.id
        self.stage += 1
        # an input read again as the first stage read it (its columns from the same dim)
        cols = self.cols_from if isinstance(source, str) else -1
        node_id = self._add(lambda i: Gemm(i, source, "", "none", cols_from=cols))
        tile = T(node_id, old.dims, old.shape, old.space, self.stage)
        self.anchored = {inputs[0]: tile} if inputs else {}
        self.space_ref = tile

        def swap(a: Any) -> Any:
            if isinstance(a, T) and a.id == old.id:
                return tile
            if isinstance(a, Leaf) and inputs and a.expr == inputs[0] and a.shape == old.shape:
                return tile
            return a

        return self.ew(fn, *(swap(a) for a in args))

    def _no_stage_after_swap(self, what: str) -> None:
        """A stage that reads its input in place with the leading dims swapped stores its
        values in that input's layout, not in rows: no later stage reads them."""
        if any(isinstance(n, Gemm) and n.swap_of for n in self.nodes):
            raise UnsupportedError(what, "after a stage over an input's swapped leading dims")

    def stat(self, fn: str, x: T, dim: int, keepdim: bool) -> T:
        """sum / max / min over one dim: the last (columns or segment), or rows (dim 0)."""
        dim = dim % len(x.dims)
        token = x.dims[dim]
        if token == 1:  # a reduction over a size-1 dim is the identity, less that dim
            if keepdim:
                return x
            dims, shape = x.dims[:dim] + x.dims[dim + 1 :], x.shape[:dim] + x.shape[dim + 1 :]
            return T(x.id, dims, shape, x.space, x.stage)
        kind = kind_of(x.dims, self.lead)
        over_rows = kind is Kind.ROW and token == "L0" and len(self.lead) == 1
        if (kind is not Kind.MAT and not over_rows) or not canonical(x.dims):
            raise UnsupportedError(f"{fn} over dim {dim}", f"of a {kind.value} value {x.dims}")
        last = max(i for i, t in enumerate(x.dims) if t != 1)
        if dim == last and token in ("C", "S"):
            axis, groups = "row", (self.groups if token == "S" else None)
        elif len(self.lead) == 1 and token == "L0":
            axis, groups = "col", None
        elif len(self.lead) > 1 and token == self.lead[-1] and not any(is_seg(t) for t in x.dims):
            axis, groups = "col", None  # per column of each batch of rows (kind BCOL)
        else:
            raise UnsupportedError(f"{fn} over dim {dim}", f"dims {x.dims}")
        dims = x.dims[:dim] + ((1,) if keepdim else ()) + x.dims[dim + 1 :]
        shape = x.shape[:dim] + ((1,) if keepdim else ()) + x.shape[dim + 1 :]
        out_kind = kind_of(dims, self.lead)
        self.tail_ops += _numel(x.shape)
        node_id = self._add(lambda i: Stat(i, out_kind, fn, x.id, axis, groups, x.space))
        return T(node_id, dims, shape, x.space, x.stage)

    def reduce(self, fn: str, x: T, dims: tuple[int, ...] | None, keepdim: bool) -> T:
        """sum / max / min over one dim, several or all (`dims` None): over the columns
        (a row statistic), then, when the leading dims are reduced too, over every row (a
        statistic of the row statistics)."""
        rank = len(x.dims)
        picked = sorted({d % rank for d in dims}) if dims is not None else list(range(rank))
        real = [d for d in picked if x.dims[d] != 1]
        if len(real) <= 1 and dims is not None:
            return self.stat(fn, x, real[0] if real else picked[0], keepdim)
        tokens = {x.dims[d] for d in real}
        present = {t for t in x.dims if t != 1}
        kind = kind_of(x.dims, self.lead)
        if tokens == present and kind is Kind.ROW:
            return self._over_rows(fn, x, keepdim)
        cols = {t for t in present if is_col(t)}
        refused = UnsupportedError(
            f"{fn} over dims {tuple(picked)}",
            f"of a value with dims {x.dims}: over the columns, or over all dims",
        )
        if kind is not Kind.MAT or not cols or any(is_seg(t) or t == "G" for t in present):
            raise refused
        if not canonical(x.dims):
            raise refused
        if tokens == cols:
            return self._row_stat(fn, x, keepdim)
        if tokens != present:
            raise refused
        out = self._over_rows(fn, self._row_stat(fn, x, False), keepdim)
        if not keepdim:
            return out
        return T(out.id, tuple(1 for _ in x.dims), tuple(1 for _ in x.shape), x.space, x.stage)

    def arg(self, fn: str, x: T, dim: int, keepdim: bool) -> T:
        """argmax / argmin over one dim: the statistic, then the least index along the dim
        where the element equals it (torch's first index; NaN not treated as the largest)."""
        dim = dim % len(x.dims)
        token = x.dims[dim]
        best = self.stat("max" if fn == "argmax" else "min", x, dim, True)
        if token == "C" and not any(is_col(t) and t != "C" for t in x.dims):
            pos = self.ew("argpos_col", x, best, Scalar(0.0))
        elif len(self.lead) > 1 and token == self.lead[-1]:
            pos = self.ew("argpos_row", x, best, Scalar(float(x.shape[dim]), "lead[-1]"))
        else:
            raise UnsupportedError(fn, f"over dim {dim} of dims {x.dims}")
        out = self.stat("min", pos, dim, keepdim)
        self.indices.add(out.id)
        return out

    def _row_stat(self, fn: str, x: T, keepdim: bool) -> T:
        """A statistic over all the columns (C, C1, ...) of each row."""
        keep = [not is_col(t) for t in x.dims]
        dims = tuple(t if k else 1 for t, k in zip(x.dims, keep, strict=True))
        shape = tuple(n if k else 1 for n, k in zip(x.shape, keep, strict=True))
        if not keepdim:
            dims = tuple(t for t, k in zip(x.dims, keep, strict=True) if k)
            shape = tuple(n for n, k in zip(x.shape, keep, strict=True) if k)
        out_kind = kind_of(dims, self.lead)
        self.tail_ops += _numel(x.shape)
        node_id = self._add(lambda i: Stat(i, out_kind, fn, x.id, "row", None, x.space))
        return T(node_id, dims, shape, x.space, x.stage)

    def _over_rows(self, fn: str, rows: T, keepdim: bool) -> T:
        """A statistic over every row of per-row values: one value (a pass over the rows)."""
        shape = tuple(1 for _ in rows.shape) if keepdim else ()
        dims_out: tuple[str | int, ...] = tuple(1 for _ in rows.dims) if keepdim else ()
        if all(t == 1 for t in rows.dims):  # one row: its statistic is the answer
            return T(rows.id, dims_out, shape, rows.space, rows.stage)
        self.tail_ops += _numel(rows.shape)
        node_id = self._add(lambda i: Stat(i, Kind.ONE, fn, rows.id, "col", None, rows.space))
        self.totals.add(node_id)
        return T(node_id, dims_out, shape, rows.space, rows.stage)

    def size(self, x: T, dim: int) -> Size:
        token = x.dims[dim % len(x.dims)]
        if len(self.lead) > 1 and token == self.lead[-1]:
            return Size("brows")  # the rows of one batch (a statistic per batch's column)
        return Size({"C": "cols", "S": "seg", "L0": "rows"}[str(token)])

    def gemm(self, a: T | Leaf, b: Leaf, b_layout: str, batched: bool = False) -> T:
        if isinstance(a, Leaf):
            if self.stage >= 0:
                raise UnsupportedError("a second GEMM on an input", a.expr)
            if len(a.shape) < 2 or (batched and len(a.shape) != 3):
                raise UnsupportedError("GEMM input rank", str(a.shape))
            self.lead = tuple(f"L{i}" for i in range(len(a.shape) - 1))
            # a transposed input (A.T, stored [K, M]) is read through its strides (Triton)
            # or copied to rows by the library (C++): the operand is the view A.mT
            a_ref: int | str = f"{a.expr}.mT" if a.transposed else a.expr
            lead_shape = a.shape[:-1]
        else:
            if a.dims != (*self.lead, "C") or kind_of(a.dims, self.lead) is not Kind.MAT:
                raise UnsupportedError("GEMM on a reshaped value", str(a.dims))
            self._no_stage_after_swap("a GEMM")
            a_ref, lead_shape = a.id, a.shape[:-1]
        n = b.shape[-2] if b_layout == "nk" else b.shape[-1]
        k = b.shape[-1] if b_layout == "nk" else b.shape[-2]
        rows = _numel(lead_shape)
        batch = lead_shape[0] if batched else 1
        self.gemm_sizes.append((batch, rows // batch, n, k))
        self.read[b.expr] = _numel(b.shape)
        if isinstance(a, Leaf):
            self.read[a.expr] = _numel(a.shape)
        self.stage += 1
        self.space = 0
        self.token_size = {f"L{i}": size for i, size in enumerate(lead_shape)} | {"C": n}
        node_id = self._add(lambda i: Gemm(i, a_ref, b.expr, b_layout, batched))
        out = T(node_id, (*self.lead, "C"), (*lead_shape, n), 0, self.stage)
        self.space_ref = out
        return out

    def anchor(self, leaf: Leaf, first: int | None = None) -> T:
        """Open a stage anchored by nothing: `leaf` (an input or parameter) read as rows of
        its last dim, the space of everything elementwise on it and of its statistics."""
        if leaf.transposed:
            raise UnsupportedError("a transposed input", f"{leaf.expr} before any other op")
        if len(leaf.shape) < 2:
            raise UnsupportedError("a one-dimensional input", f"{leaf.expr} of shape {leaf.shape}")
        if self.stage >= 0:
            raise UnsupportedError("an op on inputs alone after the first stage", leaf.expr)
        if first is None:
            first = columns_from(self.traced.graph_module, tuple(leaf.shape))
        lead_shape, col_shape = leaf.shape[:first], leaf.shape[first:]
        self.lead = tuple(f"L{i}" for i in range(len(lead_shape)))
        self.read[leaf.expr] = _numel(leaf.shape)
        self.stage += 1
        self.space = 0
        cols = ("C", *(f"C{i}" for i in range(1, len(col_shape))))
        self.token_size = {f"L{i}": size for i, size in enumerate(lead_shape)}
        self.token_size.update(zip(cols, col_shape, strict=True))
        if len(cols) > 1:
            self.col_sizes = tuple(f"{leaf.expr}.shape[{first + i}]" for i in range(len(cols)))
        self.cols_from = first
        swap = leaf.swap_of if first == 1 else ""  # read in place: rows are its dim 1
        node_id = self._add(lambda i: Gemm(i, leaf.expr, "", "none", cols_from=first, swap_of=swap))
        out = T(node_id, (*self.lead, *cols), leaf.shape, 0, self.stage)
        self.anchored = {leaf.expr: out}
        self.space_ref = out
        return out

    def window(self, leaf: Leaf, window: Window, out_shape: tuple[int, ...]) -> T:
        """Open a stage anchored by a window reduction of `leaf` (pooling of an input): its
        tile is the pooled output, rows of its last dim (every other output dim leads)."""
        what = f"{window.fn}_pool{window.dims}d"
        if self.stage >= 0:
            raise UnsupportedError(what, f"of an input ({leaf.expr}) after the first stage")
        if leaf.transposed or len(leaf.shape) not in (window.dims + 1, window.dims + 2):
            raise UnsupportedError(what, f"of {leaf.expr} of shape {leaf.shape}")
        lead_shape = out_shape[:-1]
        self.lead = tuple(f"L{i}" for i in range(len(lead_shape)))
        self.read[leaf.expr] = _numel(leaf.shape)
        volume = 1
        for k in window.kernel:
            volume *= int(k.value)
        self.tail_ops += _numel(out_shape) * volume
        self.stage += 1
        self.space = 0
        self.token_size = {f"L{i}": size for i, size in enumerate(lead_shape)}
        self.token_size["C"] = out_shape[-1]
        node_id = self._add(lambda i: Gemm(i, leaf.expr, "", "window", window=window))
        out = T(node_id, (*self.lead, "C"), out_shape, 0, self.stage)
        self.anchored = {}
        self.space_ref = out
        return out

    def pool(self, fn: str, x: T, k: Scalar, out_shape: tuple[int, ...]) -> T:
        if x.space != 0 or x.dims[-1] != "C" or kind_of(x.dims, self.lead) is not Kind.MAT:
            raise UnsupportedError(f"{fn}_pool", "only once, along the GEMM's columns")
        self.space = 1
        self.token_size["C"] = out_shape[-1]
        self.tail_ops += _numel(x.shape)
        node_id = self._add(lambda i: Pool(i, fn, x.id, k))
        return T(node_id, x.dims, out_shape, 1, x.stage)

    def segments(self, groups: Scalar, pieces: tuple[int, ...]) -> tuple[str, ...]:
        """Tokens of the columns viewed as `groups` segments of `pieces` (an image's pixels:
        S1, S2, ... when a segment is viewed as several dims)."""
        self.set_groups(groups)
        names = ("S",) if len(pieces) == 1 else tuple(f"S{i + 1}" for i in range(len(pieces)))
        self.token_size.update({"G": int(groups.value), **dict(zip(names, pieces, strict=True))})
        return ("G", *names)

    def dropout(self, x: T, p: Scalar) -> T:
        """Training-mode dropout: x * keep / (1 - p), the keep-mask drawn in the forward from
        torch's generator as the reference's dropout draws it (docs/evaluator.md, "Random
        operators"), then read by the kernels like an input."""
        if x.space != 0:
            raise UnsupportedError("dropout in training mode", "after pooling")
        if not canonical(x.dims) or any(is_seg(t) and t != "S" for t in x.dims):
            raise UnsupportedError("dropout in training mode", f"on dims {x.dims}")
        gemm = next(n for n in reversed(self.nodes) if isinstance(n, Gemm))
        first = next(n for n in self.nodes if isinstance(n, Gemm))
        n_expr = f"{gemm.b}.shape[{-2 if gemm.b_layout == 'nk' else -1}]"
        sizes = {"C": n_expr, "G": "G", "S": f"{n_expr} // G"}
        parts = [
            "1" if t == 1 else f"lead[{str(t)[1:]}]" if str(t).startswith("L") else sizes[str(t)]
            for t in x.dims
        ]
        p_expr = p.source or repr(p.value)
        expr = f"_kf_dropout_mask(({', '.join(parts)},), {p_expr}, {first.a})"
        mask = self.leaf(Leaf(expr, x.shape), x.dims, x)
        scale = Scalar(1.0 / (1.0 - p.value), f"1.0 / (1.0 - {p.source})" if p.source else "")
        return self.ew("mul", self.ew("mul", x, mask), scale)

    def set_groups(self, groups: Scalar) -> None:
        if self.groups is not None and self.groups != groups:
            raise UnsupportedError("two different segmentations", f"{self.groups} and {groups}")
        self.groups = groups

    def graph(self, out: T) -> Graph:
        if any(is_seg(t) and t != "S" for t in out.dims):
            raise UnsupportedError("an image-shaped output", "view it back to rows of features")
        work = Work(
            tuple(self.gemm_sizes),
            self.tail_ops,
            4.0 * (sum(self.read.values()) + _numel(out.shape)),
        )
        return Graph(
            tuple(self.nodes),
            out.id,
            out.dims,
            len(self.lead),
            self.groups,
            self.traced.input_names,
            work,
            updates=tuple(self.updates),
            col_sizes=self.col_sizes,
            out_shape=self.out_shape if out.id == self.out_of_shape else "",
            int_output=out.id in self.indices,
            dtype=self.traced.dtype,
        )


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _bshape(a: T, b: T) -> tuple[int, ...]:
    n = max(len(a.shape), len(b.shape))
    pa = (1,) * (n - len(a.shape)) + a.shape
    pb = (1,) * (n - len(b.shape)) + b.shape
    return tuple(max(x, y) for x, y in zip(pa, pb, strict=True))


def convert(traced: Traced) -> Graph | Unsupported:
    """The IR of a traced problem, or the first thing the synthesizer cannot express."""
    from kforge_search.agents.builtin.handlers import run_graph

    converter = Converter(traced)
    try:
        out = run_graph(converter, traced)
        if not isinstance(out, T) or converter.stage < 0:
            raise UnsupportedError("a program that computes nothing", "it returns an input")
        return converter.graph(out)
    except UnsupportedError as exc:
        return exc.unsupported
