"""The steps of a second pass over rows or columns, as its templates (rows.py.j2,
rows_split.py.j2, cols.py.j2) take them: what each walk computes and how it combines."""

from __future__ import annotations

from dataclasses import dataclass

from kforge_search.agents.builtin.ir import Kind

VECTOR_KINDS = {"row": {Kind.MAT, Kind.COL, Kind.BCOL}, "col": {Kind.MAT, Kind.ROW}}


@dataclass(frozen=True)
class Step:
    kind: str  # "top" (once per program), "stat" (a walk accumulating a statistic), "final",
    # "arg" (argmax / argmin: each lane's best value and its index, `after` their keys)
    lines: str  # "scan": a walk in order with a running total
    node: int = -1
    identity: str = ""
    combine: str = ""
    finish: str = ""
    scan: ScanStep | None = None
    acc: str = "tl.float32"  # the accumulator's dtype (sums: float64)
    best: int = -1  # "online" / "moments": the first statistic, made in the sum's walk
    x: str = ""  # "online" / "moments": the value both statistics are of
    mean: int = -1  # "moments": the row value the second statistic's deviations are from
    after: str = ""  # "moments": the lines that make `mean` from the first statistic
    nodes: tuple[int, ...] = ()  # "top": the nodes its lines make
    # "stat": other plain statistics made in the same walk, each in its own accumulator
    # `a<node>` (one_walk): their lines and combine read the elements the walk loads
    extra: tuple[Step, ...] = ()
    # "stat": how a value folds into the accumulator (ops.ReduceSpec.combine: {0} the
    # accumulator, {1} the value) and the value, masked, before its cast to the accumulator's
    # dtype; `combine` is `combined("acc", acc)`
    fold: str = ""
    value: str = ""

    def combined(self, acc: str, dtype: str) -> str:
        """The step's combine into accumulator `acc` of `dtype` (cols.py.j2's held tile:
        float32 lanes `hacc`; triton_kernels: a statistic's own `a<node>`)."""
        return self.fold.format(acc, f"{self.value}.to({dtype})")

    @property
    def made(self) -> set[int]:
        """The statistics this walk makes (or the nodes a "top" step makes)."""
        own = {self.node, self.best} - {-1} if self.kind != "top" else set(self.nodes)
        return own | {e.node for e in self.extra}


@dataclass(frozen=True)
class ScanStep:
    """A scan's walk: its input `x` computed by the step's lines at columns `shift` before
    each output's (an exclusive scan: the identity shifted in), scanned per chunk and
    combined with the running total; `after` computes and stores what needs it."""

    x: int
    fn: str  # "cumsum" | "cumprod"
    op: str  # how totals combine: "+" | "*"
    dtype: str  # of a chunk's scan: fp32 sums, fp64 products
    reverse: bool
    shift: int
    after: str
