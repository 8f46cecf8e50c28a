"""The synthesizer's IR: a GEMM (or a chain of GEMMs) and its tail, as SSA nodes.

Every tensor value lives in the row space of the GEMM output: `rows` (R, the flattened
leading dims) by `cols` (the GEMM's N, or N // k after pooling). Its `Kind` says how it is
indexed inside a kernel:

- MAT     [R, cols]       the GEMM output and everything elementwise on it
- ROW     [R]             a per-row statistic (sum, max, ... over the columns)
- SEG     [R, G]          a per-row statistic over each of G contiguous column segments
- COL     [cols]          a per-column vector (bias, scale, BatchNorm statistics)
- SEGVEC  [G]             a per-segment vector (InstanceNorm's affine weight)
- ONE     []              a one-element tensor
- BCOL    [R / BR, cols]  a per-column statistic of each batch of BR rows (the last leading
                          dim reduced: a sum over dim 1 of [B, D1, D2]); BR = that dim's size
Scalars are `Scalar` (a value, read at run time from a model attribute when it has a source)
and `Size` (a size known only at run time: the column count, a segment length, the rows).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.StrEnum):
    MAT = "mat"
    ROW = "row"
    SEG = "seg"
    COL = "col"
    SEGVEC = "segvec"
    ONE = "one"
    BCOL = "bcol"


@dataclass(frozen=True)
class Unsupported:
    """What the synthesizer cannot express, as `unsupported: <op>` plus why."""

    op: str
    why: str = ""

    @property
    def message(self) -> str:
        return f"unsupported: {self.op}" + (f" ({self.why})" if self.why else "")


class UnsupportedError(Exception):
    """Raised inside the converter; turned into an `Unsupported` at its boundary."""

    def __init__(self, op: str, why: str = ""):
        super().__init__(f"unsupported: {op}" + (f" ({why})" if why else ""))
        self.unsupported = Unsupported(op, why)


@dataclass(frozen=True)
class Scalar:
    """A Python number: `source` (e.g. "self.scaling_factor") is read at run time."""

    value: float
    source: str = ""


@dataclass(frozen=True)
class Size:
    """A size known at run time: "cols" (columns of the space), "seg" (segment length),
    "rows" (R); minus `minus` (the unbiased variance's n - 1)."""

    name: str
    minus: int = 0


Arg = int | Scalar | Size  # an int is the id of another node


@dataclass(frozen=True)
class Load:
    """A tensor the forward already has: an input (`x0`) or a parameter (`self.linear.weight`)."""

    id: int
    kind: Kind
    tensor: str
    space: int = 0  # the column space it is indexed in (0: GEMM columns, 1: pooled)
    # a COL vector over the first column tokens only, broadcast along the last `inner` (a
    # per-channel vector of [C, H, W] columns has dims (C, 1, 1), inner 2): its element for
    # column c is c // (the product of those `inner` tokens' sizes)
    inner: int = 0


@dataclass(frozen=True)
class Window:
    """A window reduction (max or average pooling) over the last len(kernel) dims of an
    input (N, C, *spatial) or (C, *spatial): per spatial dim its kernel, stride, padding and
    dilation (Scalars, read at run time where they have a source). Max pads with -inf; an
    average divides by the window's size within the padded input (`count_include_pad`) or
    by its elements within the input, as torch does (ceil_mode windows end at the padding).
    """

    fn: str  # "max" | "avg"
    kernel: tuple[Scalar, ...]
    stride: tuple[Scalar, ...]
    padding: tuple[Scalar, ...]
    dilation: tuple[Scalar, ...]
    ceil_mode: bool = False
    count_include_pad: bool = True

    @property
    def dims(self) -> int:
        return len(self.kernel)


@dataclass(frozen=True)
class Gemm:
    """A stage's anchor: the [rows, cols] tile every kernel of the stage walks.

    A GEMM: out[r, n] = sum_k a[r, k] * b[k, n]; `b_layout` "nk" when b is stored [N, K].
    Anchored by nothing (`anchor`, b_layout "none"): out[r, n] = a[r, n], a tensor read as it
    is (an input viewed as rows of its last dims, or a value an earlier stage stored). A
    program without a GEMM gets such a stage, and so does a pass over a value again after a
    statistic of all of it (x / norm(x)).
    Anchored by a window reduction (`window`, b_layout "window"): the tile is the pooled
    input `a`, rows = its leading dims and every output spatial dim but the last, cols = the
    last; each tile element reduces its window of `a` (the kernels compute it, like an acc).
    An anchor whose input `a` is another input's view with its first two dims swapped
    (`x.transpose(0, 1)`, per-channel statistics of [N, C, *pixels]) and whose rows are that
    view's first dim (cols_from 1) names that input in `swap_of`: its row r is then N
    segments of PLANE (the product of the dims after the second) elements, segment n at
    n * C * PLANE + r * PLANE of the input, which Triton's kernels read in place (no
    transposed copy), writing the stage's [rows, cols] values in the input's layout too.
    No stage follows such a stage (its values are not stored in rows).
    """

    id: int
    a: int | str  # a node id (a computed value) or an input expression such as "x0"
    b: str  # a parameter or input expression ("" for an anchor)
    b_layout: str  # "nk" (nn.Linear weight), "kn", "none" (an anchor) or "window"
    batched: bool = False  # a and b are [B, M, K] and [B, K, N] (bmm)
    kind: Kind = Kind.MAT
    window: Window | None = None  # b_layout "window": the pooling that makes the tile
    cols_from: int = -1  # an anchor's input: its dims from this one on are the columns
    swap_of: str = ""  # an anchor's input `a` is this input's dims 0 and 1 swapped (above)

    @property
    def anchor(self) -> bool:
        return self.b_layout == "none"


@dataclass(frozen=True)
class Ew:
    """An elementwise function (see ops.py) of nodes and scalars, with broadcasting."""

    id: int
    kind: Kind
    fn: str
    args: tuple[Arg, ...]
    space: int = 0


@dataclass(frozen=True)
class Stat:
    """sum / max / min over the columns of each row (axis "row", per segment when `groups`
    is set) or over the rows of each column (axis "col")."""

    id: int
    kind: Kind
    fn: str
    x: int
    axis: str
    groups: Scalar | None = None
    space: int = 0


@dataclass(frozen=True)
class Pool:
    """Max or average pooling along the columns with kernel = stride = k (no padding)."""

    id: int
    fn: str  # "max" | "avg"
    x: int
    k: Scalar
    kind: Kind = Kind.MAT
    space: int = 1


@dataclass(frozen=True)
class Scan:
    """A running sum or product along the columns of each row (cumsum, cumprod): from the
    last column back when `reverse`; each output without its own element when `exclusive`
    (the first is the identity, 0 or 1). A value over the columns that needs the row up to
    it: a pass over rows walks each row in order and carries the running total."""

    id: int
    kind: Kind
    fn: str  # "sum" | "prod"
    x: int
    reverse: bool = False
    exclusive: bool = False
    space: int = 0


Node = Load | Gemm | Ew | Stat | Pool | Scan


@dataclass(frozen=True)
class Update:
    """A buffer the forward updates in place (training BatchNorm's running statistics):
    the value of `node` copied into `target`, or, with node -1, `target` (a counter such as
    num_batches_tracked) incremented by one."""

    target: str
    node: int = -1


@dataclass(frozen=True)
class Work:
    """The work at the traced sizes, for the roofline: each GEMM's (batch, M, N, K), the
    tail's operations (one per element per elementwise op or statistic) and the bytes that
    must move at least (inputs, parameters and the output, float32, once each)."""

    gemms: tuple[tuple[int, int, int, int], ...] = ()
    tail_ops: float = 0.0
    min_bytes: float = 0.0

    @property
    def gemm_flops(self) -> float:
        return float(sum(2 * b * m * n * k for b, m, n, k in self.gemms))

    @property
    def flops(self) -> float:
        return self.gemm_flops + self.tail_ops


@dataclass(frozen=True)
class Graph:
    """The traced program: nodes in evaluation order and the output node with its dims.

    `out_dims` are tokens of the output's shape: "L0", "L1", ... (leading dims of the first
    GEMM's input), "C" (columns), "G" (segments), "S" (segment length) or the int 1.
    """

    nodes: tuple[Node, ...]
    output: int
    out_dims: tuple[str | int, ...]
    n_lead: int  # number of leading dims
    groups: Scalar | None = None  # the segment count of SEG values, when there are any
    input_names: tuple[str, ...] = ()
    work: Work = Work()
    rewrites: tuple[str, ...] = ()  # exact rewrites applied (rewrite.py), for the note
    updates: tuple[Update, ...] = ()  # buffers written besides the output
    # forward expressions of the sizes of C, C1, C2, ... where an input's trailing dims
    # together are the columns (empty: C is the columns, NC)
    col_sizes: tuple[str, ...] = ()
    # the output's shape as a forward expression where the kernels' space views it flat
    # (attention's batch of [S, D] matrices, viewed back to [..., S, D]); "" otherwise
    out_shape: str = ""
    int_output: bool = False  # the output is indices (argmax, argmin): int64
    # the dtype of the computed values and of a float output: "float32", or "float16" /
    # "bfloat16" (GEMM operands in it, float32 accumulation; the output stored in it)
    dtype: str = "float32"

    @property
    def low_precision(self) -> bool:
        return self.dtype != "float32"

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def deps(self, node: Node) -> tuple[int, ...]:
        if isinstance(node, Ew):
            return tuple(a for a in node.args if isinstance(a, int))
        if isinstance(node, Stat | Pool | Scan):
            return (node.x,)
        if isinstance(node, Gemm) and isinstance(node.a, int):
            return (node.a,)
        return ()

    def users(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for d in self.deps(n):
                found[d].append(n.id)
        return found

    @property
    def gemms(self) -> tuple[Gemm, ...]:
        return tuple(n for n in self.nodes if isinstance(n, Gemm))

    def ops(self) -> tuple[str, ...]:
        """The op names in order, for notes and reports."""
        names = []
        for n in self.nodes:
            if isinstance(n, Gemm) and n.window is not None:
                names.append(f"{n.window.fn}_pool{n.window.dims}d")
            elif isinstance(n, Gemm):
                names.append("tile" if n.anchor else "gemm")
            elif isinstance(n, Ew):
                names.append(n.fn)
            elif isinstance(n, Stat):
                names.append(f"{n.axis}_{n.fn}")
            elif isinstance(n, Pool):
                names.append(f"{n.fn}_pool")
            elif isinstance(n, Scan):
                kind = ("reverse_" if n.reverse else "") + ("exclusive_" if n.exclusive else "")
                names.append(f"{kind}cum{n.fn}")
        return tuple(names)
