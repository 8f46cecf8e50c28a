"""IR nodes as lines of Triton, in three dialects of indexing:

- "tile": a [BLOCK_M, BLOCK_N] tile of rows x columns (the GEMM kernel and its epilogue);
  per-row values are [BLOCK_M, 1], per-column values [1, BLOCK_N].
- "row":  one row (or one segment of a row) per program, walked in [BLOCK] chunks; per-row
  and per-segment values are scalars.
- "col":  a block of columns per program, walked down the rows in [BLOCK_R, BLOCK_C] tiles;
  per-column values are [1, BLOCK_C].
`Names` gives every tensor, buffer and run-time scalar one name, shared by a kernel's
parameters and by the forward that launches it.

A stage over an input's swapped leading dims (Gemm.swap_of) reads that input in place and
stores its [rows, cols] values in the input's layout: element (r, j) at
r * PLANE + (j // PLANE) * ld + j % PLANE, ld the input's stride along its first dim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kforge_search.agents.builtin.ir import Ew, Gemm, Graph, Kind, Load, Scalar, Size, Stat
from kforge_search.agents.builtin.ops import OPS, REDUCTIONS, T_TO_BF16

SIZES = {"cols": "NC", "seg": "SEG", "rows": "R", "brows": "BR"}
# Parameters declared tl.constexpr: PLANE, the length of a swapped stage's contiguous runs,
# divides column indices (a division by a constant is a multiply and a shift)
CONSTEXPR_PARAMS = ("PLANE",)
# Each dialect's row and column index of an element of a [rows, cols] value (indexed ops)
INDEX = {
    "tile": {"row": "rows[:, None]", "col": "cols[None, :]"},
    "row": {"row": "row", "col": "cols"},
    "col": {"row": "rows[:, None]", "col": "cols[None, :]"},
}


@dataclass
class Names:
    """Forward-side names of leaves (`t0`), scalars read at run time (`c0`), buffers (`b7`)."""

    tensors: dict[tuple[str, Kind], str] = field(default_factory=dict)
    scalars: dict[str, str] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)
    swapped: dict[str, str] = field(default_factory=dict)  # name -> the input read in place

    def tensor(self, expr: str, kind: Kind) -> str:
        return self.tensors.setdefault((expr, kind), f"t{len(self.tensors)}")

    def swapped_input(self, view: str, base: str) -> str:
        """The name of `view` (`base` with its dims 0 and 1 swapped) read in place: the
        forward passes `base` itself, as rows of its first dim (Gemm.swap_of)."""
        name = self.tensor(view, Kind.MAT)
        self.swapped[name] = base
        return name

    def scalar(self, source: str) -> str:
        return self.scalars.setdefault(source, f"c{len(self.scalars)}")


@dataclass
class Params:
    """One kernel's extra parameters, in order, each also a forward variable."""

    names: list[str] = field(default_factory=list)

    def add(self, name: str) -> str:
        if name not in self.names:
            self.names.append(name)
        return name


def signature(params: list[str]) -> list[str]:
    """A kernel's parameters as its `def` declares them."""
    return [f"{p}: tl.constexpr" if p in CONSTEXPR_PARAMS else p for p in params]


def literal(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return f"float('{value}')"
    return repr(float(value))


@dataclass
class Lines:
    graph: Graph
    dialect: str  # "tile" | "row" | "col"
    names: Names
    params: Params
    buffered: set[int]  # nodes read from their buffer b<id> instead of being computed
    swapped: bool = False  # the stage's input and [rows, cols] buffers: Gemm.swap_of layout

    def operand(self, arg: int | Scalar | Size) -> str:
        if isinstance(arg, int):
            return f"v{arg}"
        if isinstance(arg, Size):
            name = SIZES[arg.name]
            if name == "BR":
                self.params.add("BR")
            return f"({name} - {arg.minus})" if arg.minus else name
        if arg.source:
            return self.params.add(self.names.scalar(arg.source))
        return literal(arg.value)

    def _ptr_and_ld(self, node_id: int) -> tuple[str, Kind]:
        node = self.graph.node(node_id)
        if node_id in self.buffered:
            name = f"b{node_id}"
        elif isinstance(node, Gemm):  # an anchor: its input, read as a [rows, cols] tile
            assert node.anchor and isinstance(node.a, str)
            if self.swapped:
                name = self.names.swapped_input(node.a, node.swap_of)
            else:
                name = self.names.tensor(node.a, Kind.MAT)
        else:
            assert isinstance(node, Load)
            name = self.names.tensor(node.tensor, node.kind)
        self.params.add(name)
        if node.kind is Kind.MAT:
            self.params.add(f"ld_{name}")
        return name, node.kind

    def _at(self, name: str, swapped: bool) -> str:
        """The offset of each element of a [rows, cols] tensor or buffer in this dialect:
        rows of length ld, or where `swapped` (a swapped stage's input, read in place, and
        its buffers) PLANE-long runs of a row at ld apart (Gemm.swap_of)."""
        ld = f"ld_{name}"
        if self.dialect == "row":
            if not swapped:
                return f"row64 * {ld} + cols"
            plane = self.params.add("PLANE")
            run = f"(cols // {plane}).to(row64.dtype)"
            return f"row64 * {plane} + {run} * {ld} + cols % {plane}"
        if not swapped:
            return f"rows64[:, None] * {ld} + cols[None, :]"
        plane = self.params.add("PLANE")
        run = f"(cols // {plane}).to(rows64.dtype)"
        return f"rows64[:, None] * {plane} + ({run} * {ld} + cols % {plane})[None, :]"

    def load(self, node_id: int) -> str:
        p, kind = self._ptr_and_ld(node_id)
        node = self.graph.node(node_id)
        # computed values of a swapped stage and its input are in the input's layout
        swapped = self.swapped and (node_id in self.buffered or isinstance(node, Gemm))
        mat = f"{p} + {self._at(p, swapped)}" if kind is Kind.MAT else ""
        # a per-column vector broadcast along the inner columns (see Load.inner)
        at = (
            f"cols // {self.params.add(f'INNER{node.inner}')}"
            if isinstance(node, Load) and node.inner and node_id not in self.buffered
            else "cols"
        )
        if self.dialect == "row":
            expr = {
                Kind.MAT: f"tl.load({mat}, mask=mask_c, other=0.0)",
                Kind.COL: f"tl.load({p} + {at}, mask=mask_c, other=0.0)",
                Kind.ROW: f"tl.load({p} + row)",
                Kind.SEG: f"tl.load({p} + row64 * G + seg)",
                Kind.SEGVEC: f"tl.load({p} + seg)",
                Kind.ONE: f"tl.load({p})",
                Kind.BCOL: (
                    f"tl.load({p} + (row64 // {self._br()}) * NC + cols, mask=mask_c, other=0.0)"
                ),
            }[kind]
        else:
            both = "mask=mask_r[:, None] & mask_c[None, :], other=0.0"
            expr = {
                Kind.MAT: f"tl.load({mat}, {both})",
                Kind.COL: f"tl.load({p} + {at}, mask=mask_c, other=0.0)[None, :]",
                Kind.ROW: f"tl.load({p} + rows, mask=mask_r, other=0.0)[:, None]",
                Kind.SEG: f"tl.load({p} + rows64[:, None] * G + (cols // SEG)[None, :], {both})",
                Kind.SEGVEC: f"tl.load({p} + cols // SEG, mask=mask_c, other=0.0)[None, :]",
                Kind.ONE: f"tl.load({p})",
                Kind.BCOL: (
                    f"tl.load({p} + bid * NC + cols, mask=mask_c, other=0.0)[None, :]"
                    if self.dialect == "col"
                    else f"tl.load({p} + (rows64 // {self._br()})[:, None] * NC + cols[None, :], "
                    f"{both})"
                ),
            }[kind]
        if node_id in self.buffered and not self._low_output(node_id):
            return f"v{node_id} = {expr}"  # buffers are float32; an input may be bool or integer
        return f"v{node_id} = {expr}.to(tl.float32)"

    def _low_output(self, node_id: int) -> bool:
        """Whether the node is the program's float16 / bfloat16 output (its buffer is in
        that dtype; every other buffer is float32)."""
        g = self.graph
        return node_id == g.output and g.low_precision and not g.int_output

    def compute(self, node_id: int) -> str:
        node = self.graph.node(node_id)
        if node_id in self.buffered or isinstance(node, Load):
            return self.load(node_id)
        if isinstance(node, Gemm) and node.anchor:  # the stage's tile, read as it is
            if isinstance(node.a, str):
                return self.load(node_id)
            return f"{self.compute(node.a)}\nv{node_id} = v{node.a}"  # a stored value
        if isinstance(node, Ew):
            spec = OPS[node.fn]
            self.names.helpers.update(spec.helpers)
            args = (self.operand(a) for a in node.args)
            return f"v{node_id} = " + spec.triton.format(*args, **INDEX[self.dialect])
        if isinstance(node, Stat) and self.dialect == "tile":
            red = REDUCTIONS[node.fn]
            if node.axis == "row":
                masked = f"tl.where(mask_c[None, :], v{node.x}, {red.identity}).to({red.acc})"
                return f"v{node_id} = {red.finish}({masked}, axis=1).to(tl.float32)[:, None]"
            masked = f"tl.where(mask_r[:, None], v{node.x}, {red.identity}).to({red.acc})"
            return f"v{node_id} = {red.finish}({masked}, axis=0).to(tl.float32)[None, :]"
        raise AssertionError(f"node {node} is not computed inline in the {self.dialect} dialect")

    def store(self, node_id: int) -> str:
        name = self.params.add(f"b{node_id}")
        kind = self.graph.node(node_id).kind
        v = f"v{node_id}"
        if self._low_output(node_id) and self.graph.dtype == "bfloat16":
            self.names.helpers.add(T_TO_BF16)  # (float16: the store's own cast rounds)
            v = f"{T_TO_BF16}({v})"
        at = f"{name} + {self._at(name, self.swapped)}" if kind is Kind.MAT else ""
        if self.dialect == "row":
            return {
                Kind.MAT: f"tl.store({at}, {v}, mask=mask_c)",
                Kind.ROW: f"tl.store({name} + row, {v})",
                Kind.SEG: f"tl.store({name} + row64 * G + seg, {v})",
            }[kind] + self._ld(name, kind)
        both = "mask=mask_r[:, None] & mask_c[None, :]"
        if self.dialect == "col" and kind is Kind.ROW:  # per-row values of the last pass
            first = "mask=mask_r[:, None] & (cols == 0)[None, :]"
            return f"tl.store({name} + rows[:, None] + cols[None, :] * 0, {v}, {first})"
        return {
            Kind.MAT: f"tl.store({at}, {v}, {both})",
            Kind.ROW: f"tl.store({name} + rows[:, None], {v}, mask=mask_r[:, None])",
            Kind.COL: f"tl.store({name} + cols[None, :], {v}, mask=mask_c[None, :])",
            Kind.BCOL: f"tl.store({name} + bid * NC + cols[None, :], {v}, mask=mask_c[None, :])",
            Kind.ONE: f"tl.store({name} + cols[None, :] * 0, {v}, mask=(cols == 0)[None, :])",
        }[kind] + self._ld(name, kind)

    def _br(self) -> str:
        """The rows of one batch (BCOL values), a parameter of the kernel."""
        return self.params.add("BR")

    def _ld(self, name: str, kind: Kind) -> str:
        if kind is Kind.MAT:
            self.params.add(f"ld_{name}")
        return ""
