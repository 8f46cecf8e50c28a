"""Lowering: which node is computed in which kernel, and what is written to memory.

Each GEMM opens a stage. Within a stage, a node's phase is 0 when it can be computed in the
GEMM's epilogue (elementwise on the tile, pooling), and one more than its input for a
statistic (it needs the whole row or column). Phase-0 nodes run in the GEMM kernel; the rest
("the tail") runs in a second pass over the rows (or columns), or in the GEMM kernel itself
when one tile spans the row (the "fused" placement, chosen per call at run time).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kforge_search.agents.builtin.ir import (
    Ew,
    Gemm,
    Graph,
    Kind,
    Load,
    Pool,
    Scan,
    Size,
    Stat,
    Unsupported,
)


@dataclass(frozen=True)
class StagePlan:
    index: int
    gemm: Gemm
    pool: Pool | None
    phase0: frozenset[int]  # GEMM, pooling and the epilogue's nodes (not loads)
    tail: tuple[int, ...]  # nodes after the first statistic, in order
    axis: str  # "" (no statistics), "row" or "col"
    segmented: bool  # row statistics per segment (GroupNorm, InstanceNorm)
    gemm_stores: tuple[int, ...]  # what the GEMM kernel writes when the tail runs apart
    outs: tuple[int, ...]  # what later stages or the output read
    # Column statistics before row statistics (training BatchNorm, then softmax): a pass
    # over the columns first computes `col_tail` and writes `col_outs` (per-column values
    # the row pass reads); `tail` is then the row pass.
    col_tail: tuple[int, ...] = ()
    col_outs: tuple[int, ...] = ()
    # Statistics over the rows of row statistics (a row sum, then its logsumexp over the
    # batch): a last pass of one program over the row pass's results (`post_tail`, per-row
    # and one-element values), writing `post_outs`.
    post_tail: tuple[int, ...] = ()
    post_outs: tuple[int, ...] = ()
    # Whole-row statistics after per-segment ones (GroupNorm, then a mean over the row): a
    # second pass over whole rows, reading what the segment pass wrote.
    row2_tail: tuple[int, ...] = ()
    # Scans in the row pass (in `tail`, in order): each walks the row in order with a
    # running total; those later steps read back are among `outs`.
    scans: tuple[int, ...] = ()
    # Column statistics per batch of rows (kind BCOL: the last leading dim reduced): the
    # pass over columns walks each batch's rows apart, one program per (columns, batch).
    batched_cols: bool = False

    @property
    def fusable(self) -> bool:
        """Whether the tail can run inside the GEMM kernel when a tile spans the row/column."""
        return (
            self.axis in ("row", "col")
            and not self.segmented
            and not self.col_tail
            and not self.post_tail
            and not self.row2_tail
            and not self.scans
            and not self.batched_cols
        )

    def whole_row_pass(self) -> StagePlan:
        """The second pass over rows, unsegmented (its outputs are among `outs`)."""
        return dataclasses.replace(
            self, tail=self.row2_tail, segmented=False, col_tail=(), col_outs=(),
            post_tail=(), post_outs=(), row2_tail=(),
        )  # fmt: skip

    def final_pass(self) -> StagePlan:
        """The last pass, as a stage whose tail runs over the rows of one column."""
        return dataclasses.replace(
            self, tail=self.post_tail, axis="col", segmented=False, outs=self.post_outs,
            col_tail=(), col_outs=(), post_tail=(), post_outs=(), row2_tail=(),
        )  # fmt: skip

    def column_pass(self) -> StagePlan:
        """The first of two passes, as a stage whose tail is the column statistics."""
        return dataclasses.replace(
            self, tail=self.col_tail, axis="col", segmented=False, outs=self.col_outs,
            col_tail=(), col_outs=(), row2_tail=(),
        )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    graph: Graph
    stages: tuple[StagePlan, ...]
    stage_of: dict[int, int]  # node id -> stage (loads: -1)

    def kind(self, node_id: int) -> Kind:
        return self.graph.node(node_id).kind

    def stored(self) -> tuple[int, ...]:
        """Every node written to a buffer by some kernel (second-pass placement)."""
        out: list[int] = []
        for s in self.stages:
            for n in (*s.gemm_stores, *s.outs, *s.post_outs):
                if n not in out:
                    out.append(n)
        return tuple(out)


def closure(
    graph: Graph,
    targets: tuple[int, ...],
    available: set[int],
    leaves: set[int] | frozenset[int] = frozenset(),
) -> list[int]:
    """Ids needed to compute `targets`, in graph order: `available` are computed already
    (left out), `leaves` are read from buffers (kept, their inputs not followed)."""
    need: set[int] = set()
    stack = [t for t in targets if t not in available]
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        if n not in leaves:
            stack.extend(d for d in graph.deps(graph.node(n)) if d not in available)
    return sorted(need)


def _live(graph: Graph) -> set[int]:
    updated = tuple(u.node for u in graph.updates if u.node >= 0)
    live = set(closure(graph, (graph.output, *updated), set()))
    return live


def _stages(graph: Graph, live: set[int]) -> dict[int, int]:
    stage_of: dict[int, int] = {}
    gemm_index = 0
    for node in graph.nodes:
        if node.id not in live:
            continue
        if isinstance(node, Load):
            stage_of[node.id] = -1
        elif isinstance(node, Gemm):
            stage_of[node.id] = gemm_index
            gemm_index += 1
        else:  # of inputs alone: computed in the stage open at that point
            stage_of[node.id] = max(gemm_index - 1, *(stage_of[d] for d in graph.deps(node)))
    return stage_of


def _phases(graph: Graph, live: set[int], stage_of: dict[int, int]) -> dict[int, int]:
    phase: dict[int, int] = {}
    for node in graph.nodes:
        if node.id not in live:
            continue
        same = [d for d in graph.deps(node) if stage_of[d] == stage_of[node.id]]
        base = max((phase[d] for d in same), default=0)
        if isinstance(node, Stat | Scan):  # needs the whole row (a scan: the row up to it)
            base += 1
        elif isinstance(node, Pool) and base > 0:
            raise _Refuse("pooling after a row statistic")
        phase[node.id] = base
    return phase


class _Refuse(Exception):
    pass


def _post_part(graph: Graph, mine: list[int]) -> tuple[int, ...]:
    """Statistics over the rows of per-row values and everything computed from them (which
    must be per-row or one-element values: no pass over the GEMM's output follows)."""
    part: set[int] = set()
    for n in mine:
        node = graph.node(n)
        deps = graph.deps(node)
        over_rows = (
            isinstance(node, Stat) and node.axis == "col" and graph.node(node.x).kind is Kind.ROW
        )
        if over_rows or any(d in part for d in deps):
            if node.kind not in (Kind.ROW, Kind.ONE):
                raise _Refuse("a value over the GEMM's columns after a statistic over the rows")
            if isinstance(node, Stat) and not over_rows:
                raise _Refuse("a statistic over the columns after a statistic over the rows")
            part.add(n)
    return tuple(sorted(part))


def _column_part(graph: Graph, mine: list[int], phase: dict[int, int]) -> tuple[int, ...]:
    """With column and row statistics after one GEMM: the column statistics, what they need
    and the per-column values made from them only (a pass over the columns before the rows).
    Refused when a column statistic needs a row statistic."""
    stats = [graph.node(n) for n in mine if isinstance(graph.node(n), Stat)]
    cols = tuple(st.id for st in stats if st.axis == "col")  # type: ignore[union-attr]
    rows = {st.id for st in stats if st.axis == "row"}  # type: ignore[union-attr]
    need = set(closure(graph, cols, set()))
    if need & rows:
        raise _Refuse("column statistics of row statistics after one GEMM")
    part = {n for n in need if n in mine and phase[n] > 0}
    for n in mine:
        node = graph.node(n)
        deps = [d for d in graph.deps(node) if d in mine and phase[d] > 0]
        if node.kind is Kind.COL and deps and all(d in part for d in deps):
            part.add(n)
    if any(graph.node(n).kind in (Kind.SEG, Kind.SEGVEC) for n in part):
        raise _Refuse("per-segment values in column statistics")
    return tuple(sorted(part))


def _whole_row_part(graph: Graph, mine: list[int]) -> tuple[int, ...]:
    """Whole-row statistics after per-segment ones, and what is computed from them. They
    read per-row, per-column and full values of the segment pass, nothing per segment."""
    part: set[int] = set()
    for n in mine:
        node = graph.node(n)
        whole = isinstance(node, Stat) and node.axis == "row" and node.groups is None
        if whole or any(d in part for d in graph.deps(node)):
            if isinstance(node, Stat) and not whole:
                raise _Refuse("per-segment or column statistics after whole-row statistics")
            part.add(n)
    for n in part:
        node = graph.node(n)
        if node.kind in (Kind.SEG, Kind.SEGVEC) or (
            isinstance(node, Ew) and any(a == Size("seg") for a in node.args)
        ):
            raise _Refuse("per-segment values after whole-row statistics")
        if any(graph.node(d).kind in (Kind.SEG, Kind.SEGVEC) for d in graph.deps(node)):
            raise _Refuse("whole-row statistics of per-segment values")
    return tuple(sorted(part))


def _batched_cols(graph: Graph, stats: list[object]) -> bool:
    """Whether the stage's column statistics are per batch of rows (all of them, or none:
    one pass over columns walks either every row or each batch's)."""
    kinds = {st.kind is Kind.BCOL for st in stats if isinstance(st, Stat) and st.axis == "col"}
    if len(kinds) > 1:
        raise _Refuse("column statistics per batch beside ones over every row")
    return kinds == {True}


def _reads_input(node: object) -> bool:
    """An anchor that reads an input: the passes after the tile read the input again rather
    than a copy of it."""
    return isinstance(node, Gemm) and node.anchor and isinstance(node.a, str)


def _from_inputs(graph: Graph, node_id: int) -> bool:
    """Whether a value is elementwise on inputs alone (x * mask on an anchor that reads x):
    the passes compute it again from the inputs rather than read a copy the tile kernel
    wrote (fewer bytes: the inputs are read either way)."""
    need = closure(graph, (node_id,), set())
    return all(isinstance(graph.node(n), Load | Ew) or _reads_input(graph.node(n)) for n in need)


def _scan_buffers(graph: Graph, tail: tuple[int, ...]) -> set[int]:
    """Scans the row pass writes to read them back: those that a later statistic or scan
    needs, or a value that needs a later one too (each walks the row on its own)."""
    wide = [n for n in tail if isinstance(graph.node(n), Stat | Scan)]
    mine = set(tail)
    found: set[int] = set()
    for i, scan in enumerate(wide):
        if not isinstance(graph.node(scan), Scan):
            continue
        later = set(wide[i + 1 :])
        for n in tail:
            need = set(closure(graph, (n,), set())) & mine
            if n != scan and scan in need and need & later:
                found.add(scan)
                break
    return found


def scan_outs(
    graph: Graph, stage: StagePlan, scan_id: int, done: set[int], have: set[int], leaves: set[int]
) -> tuple[int, ...]:
    """The row pass's outputs over the columns that a scan's walk writes (not in `done`):
    the scan itself when it is written, and those that need it but no later statistic or
    scan (given `have` computed and `leaves` read from buffers)."""
    wide = [n for n in stage.tail if isinstance(graph.node(n), Stat | Scan)]
    later = set(wide[wide.index(scan_id) + 1 :])
    found = []
    for n in stage.outs:
        if n not in stage.tail or n in done or graph.node(n).kind not in (Kind.MAT, Kind.COL):
            continue
        need = set(closure(graph, (n,), have, leaves))
        if n == scan_id or (scan_id in need and not need & later):
            found.append(n)
    return tuple(found)


def lower(graph: Graph) -> Plan | Unsupported:
    try:
        return _lower(graph)
    except _Refuse as exc:
        return Unsupported(str(exc))


def _lower(graph: Graph) -> Plan:
    live = _live(graph)
    stage_of = _stages(graph, live)
    phase = _phases(graph, live, stage_of)
    users = graph.users()
    updated = {u.node for u in graph.updates}
    stages = []
    for gemm in graph.gemms:
        if gemm.id not in live:
            raise _Refuse("a GEMM whose result is unused")
        s = stage_of[gemm.id]
        mine = [n for n in sorted(live) if stage_of[n] == s]
        post_tail = _post_part(graph, mine)
        mine = [n for n in mine if n not in post_tail]
        stats = [graph.node(n) for n in mine if isinstance(graph.node(n), Stat)]
        axes = {st.axis for st in stats}  # type: ignore[union-attr]
        segs = {st.groups is not None for st in stats if st.axis == "row"}  # type: ignore[union-attr]
        scans = tuple(n for n in mine if isinstance(graph.node(n), Scan))
        if scans:
            if True in segs:
                raise _Refuse("a scan with statistics per row segment")
            axes.add("row")
        col_tail: tuple[int, ...] = ()
        if len(axes) > 1:
            col_tail = _column_part(graph, mine, phase)
            axes = {"row"}
        row2_tail: tuple[int, ...] = ()
        if len(segs) > 1:  # per-segment statistics, then whole-row ones: two row passes
            row2_tail = _whole_row_part(graph, mine)
            segs = {True}
        pools = [graph.node(n) for n in mine if isinstance(graph.node(n), Pool)]
        if len(pools) > 1:
            raise _Refuse("two poolings after one GEMM")
        tail = tuple(n for n in mine if phase[n] > 0 and n not in col_tail and n not in row2_tail)
        phase0 = frozenset(n for n in mine if phase[n] == 0)
        post_ins = {d for n in post_tail for d in graph.deps(graph.node(n)) if d in mine}
        post_ins |= {d for n in row2_tail for d in graph.deps(graph.node(n)) if d in tail}
        outs = tuple(
            n
            for n in mine
            if n in post_ins
            or n == graph.output
            or n in updated
            or any(stage_of.get(u, s) > s for u in users[n] if u in live)
        )
        if any(n in (*col_tail, *row2_tail) for n in scans):
            raise _Refuse("a scan in a pass over columns or after row-segment statistics")
        read_back = _scan_buffers(graph, tail)
        outs = tuple(n for n in mine if n in outs or n in read_back)
        passes = (*tail, *col_tail, *row2_tail)
        needed_by_tail = {d for t in passes for d in graph.deps(graph.node(t))}
        gemm_stores = tuple(
            n
            for n in sorted(phase0)
            if graph.node(n).kind is Kind.MAT
            and (n in outs or (n in needed_by_tail and not _from_inputs(graph, n)))
        )
        col_kind = {n for n in col_tail if graph.node(n).kind is Kind.COL}
        rows = (*tail, *row2_tail)
        reach = closure(graph, rows, set(), set(gemm_stores) | col_kind) if col_tail else []
        col_outs = tuple(n for n in col_tail if n in col_kind and (n in reach or n in outs))
        post_outs = tuple(
            n
            for n in post_tail
            if n == graph.output
            or n in updated
            or any(stage_of.get(u, s) > s for u in users[n] if u in live)
        )
        for n in outs:
            if graph.node(n).kind not in (Kind.MAT, Kind.ROW, Kind.SEG, Kind.COL, Kind.BCOL):
                raise _Refuse(f"an output of kind {graph.node(n).kind.value}")
        stages.append(
            StagePlan(
                index=s,
                gemm=gemm,
                pool=pools[0] if pools else None,  # type: ignore[arg-type]
                phase0=phase0,
                tail=tail,
                axis=axes.pop() if axes else "",
                segmented=bool(segs and segs.pop()),
                gemm_stores=gemm_stores,
                outs=outs,
                col_tail=col_tail,
                col_outs=col_outs,
                post_tail=post_tail,
                post_outs=post_outs,
                row2_tail=row2_tail,
                batched_cols=_batched_cols(graph, stats),
                scans=scans,
            )
        )
    for st in stages[1:]:
        a = st.gemm.a
        if isinstance(a, int) and graph.node(a).kind is not Kind.MAT:
            raise _Refuse("a GEMM on a statistic")
    return Plan(graph, tuple(stages), stage_of)
