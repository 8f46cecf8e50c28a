"""A Plan and a CppGenome as one self-contained cpu-cpp candidate (ModelNew).

Every candidate carries the same C++ library (templates/cpp/library.cpp.j2, rendered from
the op table), so every problem shares one build; what is problem-specific is a program
of vector instructions per GEMM stage (a constant int64 tensor) and the stage's sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from kforge_search.agents.builtin import render as r
from kforge_search.agents.builtin.genome import CppGenome
from kforge_search.agents.builtin.ir import Ew, Gemm, Kind, Load, Scalar, Scan, Size, Stat
from kforge_search.agents.builtin.ops import ELEMENTWISE, REDUCTIONS, cpp_opcode
from kforge_search.agents.builtin.plan import Plan, StagePlan, scan_outs
from kforge_search.agents.builtin.source import model_source
from kforge_search.agents.builtin.triton_lines import Names, literal

OP_ACC, OP_LOAD, OP_SCALAR, OP_SIZE, OP_STAT, OP_STORE, OP_COPY = 100, 101, 102, 103, 104, 105, 106
OP_SCAN = 107
KIND_CODE = {
    Kind.MAT: 0, Kind.ROW: 1, Kind.SEG: 2, Kind.COL: 3, Kind.SEGVEC: 4, Kind.ONE: 5, Kind.BCOL: 6,
}  # fmt: skip
KIND_INNER = 7  # a load only: a COL vector broadcast along the inner columns (Load.inner)
STEP_TOP, STEP_STAT, STEP_FINAL, STEP_SCAN = 0, 1, 2, 3
SIZE_CODE = {"cols": 0, "seg": 1, "rows": 2, "brows": 3}
PASS_BITS = {"": 0, "row": 1, "col": 2, "post": 4, "whole": 8}
VECTOR_KINDS = {"row": {Kind.MAT, Kind.COL, Kind.BCOL}, "col": {Kind.MAT, Kind.ROW}}
EXTENSION = "kforge_builtin_cpp"
CFLAGS = ["-O3", "-fopenmp", "-fno-trapping-math", "-fno-math-errno"]


@cache
def library_source() -> str:
    return r.render_template("cpp/library.cpp.j2", ops=ELEMENTWISE)


@dataclass
class StageCode:
    """Instructions, registers, tensors and scalars of one stage."""

    plan: Plan
    stage: StagePlan
    names: Names
    leaves: set[int]
    code: list[int] = field(default_factory=list)
    regs: dict[object, int] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)
    scalars: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # buffers this stage writes

    def reg(self, key: object) -> int:
        return self.regs.setdefault(key, len(self.regs))

    def tensor(self, name: str) -> int:
        """An input's index, or -(j + 1) for the j-th buffer this stage writes (the library
        makes those and puts them after the inputs: `resolve` renumbers)."""
        if name in self.outputs:
            return -(self.outputs.index(name) + 1)
        if name not in self.tensors:
            self.tensors.append(name)
        return self.tensors.index(name)

    def resolve(self) -> list[int]:
        code = list(self.code)
        for i in range(0, len(code), 5):
            field = {OP_LOAD: 2, OP_STORE: 3}.get(code[i])
            if field is not None and code[i + field] < 0:
                code[i + field] = len(self.tensors) - code[i + field] - 1
        return code

    def emit(self, op: int, dst: int = 0, a: int = 0, b: int = 0, c: int = 0) -> None:
        self.code += [op, dst, a, b, c]

    def operand(self, arg: int | Scalar | Size) -> int:
        if isinstance(arg, int):
            return self.reg(arg)
        dst = self.reg(("const", arg))
        if isinstance(arg, Size):
            self.emit(OP_SIZE, dst, SIZE_CODE[arg.name], arg.minus)
            return dst
        text = f"float({arg.source})" if arg.source else literal(arg.value)
        self.emit(OP_SCALAR, dst, self._scalar(text))
        return dst

    def _scalar(self, text: str) -> int:
        """The index of a run-time scalar (a forward expression) in the stage's scalars."""
        if text not in self.scalars:
            self.scalars.append(text)
        return self.scalars.index(text)

    def node(self, node_id: int) -> None:
        graph = self.plan.graph
        node = graph.node(node_id)
        if node_id in self.leaves:
            self.emit(OP_LOAD, self.reg(node_id), self.tensor(f"b{node_id}"), KIND_CODE[node.kind])
        elif isinstance(node, Load) and node.inner:  # column // INNER<k>, a scalar's index
            name = self.names.tensor(node.tensor, node.kind)
            div = self._scalar(f"float(INNER{node.inner})")
            self.emit(OP_LOAD, self.reg(node_id), self.tensor(name), KIND_INNER, div)
        elif isinstance(node, Load):
            name = self.names.tensor(node.tensor, node.kind)
            self.emit(OP_LOAD, self.reg(node_id), self.tensor(name), KIND_CODE[node.kind])
        elif isinstance(node, Gemm) and node.anchor:  # the tile, read as it is
            if isinstance(node.a, str):
                name = self.names.tensor(node.a, Kind.MAT)
                self.emit(OP_LOAD, self.reg(node_id), self.tensor(name), KIND_CODE[Kind.MAT])
            else:  # a value an earlier stage stored
                self.node(node.a)
                self.emit(OP_COPY, self.reg(node_id), self.reg(node.a))
        elif isinstance(node, Gemm):
            self.emit(OP_ACC, self.reg(node_id))
        elif isinstance(node, Ew):
            args = [self.operand(a) for a in node.args] + [0, 0]
            self.emit(cpp_opcode(node.fn), self.reg(node_id), args[0], args[1], args[2])
        else:
            raise AssertionError(f"{node} is not computed by an instruction")

    def store(self, node_id: int) -> None:
        kind = self.plan.kind(node_id)
        self.emit(OP_STORE, 0, self.reg(node_id), self.tensor(f"b{node_id}"), KIND_CODE[kind])

    def section(self, ids: list[int], stores: tuple[int, ...] = ()) -> tuple[int, int]:
        start = len(self.code) // 5
        for n in ids:
            self.node(n)
        for n in stores:
            self.store(n)
        return start, len(self.code) // 5 - start


def _epilogue(sc: StageCode, stores: tuple[int, ...]) -> list[int]:
    """pre_start pre_n post_start post_n pool_fn pool_src pool_dst."""
    graph, st = sc.plan.graph, sc.stage
    g, pool = st.gemm.id, st.pool
    if st.gemm.anchor and not stores:  # nothing to write: the passes read the input
        return [len(sc.code) // 5, 0, 0, 0, 0, 0, 0]
    if pool is None:
        pre = sc.section([g, *r.schedule(graph, stores, {g}, sc.leaves)], stores)
        return [*pre, 0, 0, 0, 0, 0]
    pre = sc.section([g, *r.schedule(graph, (pool.x,), {g}, sc.leaves)])
    post = sc.section(r.schedule(graph, stores, {pool.id}, sc.leaves), stores)
    fn = 0 if pool.fn == "max" else 1
    return [*pre, *post, fn, sc.reg(pool.x), sc.reg(pool.id)]


def _pass_steps(sc: StageCode, st: StagePlan) -> list[list[int]]:
    """Steps of a pass over rows or columns: [kind, start, count, src, fn, slot] each."""
    graph = sc.plan.graph
    if not st.tail:
        return []
    vector = VECTOR_KINDS[st.axis]
    have: set[int] = set()
    steps: list[list[int]] = []

    def top(ids: list[int], stores: tuple[int, ...] = ()) -> list[int]:
        scalar = [n for n in ids if graph.node(n).kind not in vector]
        if scalar or stores:
            steps.append([STEP_TOP, *sc.section(scalar, stores), 0, 0, 0])
            have.update(scalar)
        return [n for n in ids if graph.node(n).kind in vector]

    done: set[int] = set()  # outputs a scan's walk stored
    stats = [n for n in st.tail if isinstance(graph.node(n), Stat)]
    for stat_id in (n for n in st.tail if isinstance(graph.node(n), Stat | Scan)):
        stat = graph.node(stat_id)
        if isinstance(stat, Scan):
            steps.append(_scan_step(sc, st, stat, have, done, top))
            continue
        assert isinstance(stat, Stat)
        slot = stats.index(stat_id)
        loop = top(r.schedule(graph, (stat.x,), have, sc.leaves))
        fn = REDUCTIONS[stat.fn].cpp_code
        steps.append([STEP_STAT, *sc.section(loop), sc.reg(stat.x), fn, slot])
        start = len(sc.code) // 5
        sc.emit(OP_STAT, sc.reg(stat_id), slot)
        steps.append([STEP_TOP, start, 1, 0, 0, 0])
        have.add(stat_id)
    outs = [n for n in st.outs if n in st.tail and n not in done]
    scalar_outs = tuple(n for n in outs if graph.node(n).kind not in vector)
    if scalar_outs:
        top(r.schedule(graph, scalar_outs, have, sc.leaves), scalar_outs)
    vector_outs = tuple(n for n in outs if graph.node(n).kind in vector)
    if vector_outs:
        loop = top(r.schedule(graph, vector_outs, have, sc.leaves))
        steps.append([STEP_FINAL, *sc.section(loop, vector_outs), 0, 0, 0])
    return steps


def _scan_step(
    sc: StageCode,
    st: StagePlan,
    scan: Scan,
    have: set[int],
    done: set[int],
    top: Callable[[list[int]], list[int]],
) -> list[int]:
    """A scan's walk over the row, chunk by chunk in order (OP_SCAN carries the total):
    its input, the scan, then the outputs that need it and no later statistic; the scan is
    read back from its buffer by later steps when it is written."""
    graph = sc.plan.graph
    loop = top(r.schedule(graph, (scan.x,), have, sc.leaves))
    here = scan_outs(graph, st, scan.id, done, have, sc.leaves)
    after = top(r.schedule(graph, here, have | {scan.id} | set(loop), sc.leaves))
    start = len(sc.code) // 5
    for n in loop:
        sc.node(n)
    flags = int(scan.fn == "prod") | 2 * int(scan.reverse) | 4 * int(scan.exclusive)
    sc.emit(OP_SCAN, sc.reg(scan.id), sc.reg(scan.x), flags)
    for n in after:
        sc.node(n)
    for n in here:
        sc.store(n)
    done.update(here)
    if scan.id in st.outs:
        sc.leaves = sc.leaves | {scan.id}
    count = len(sc.code) // 5 - start
    return [STEP_SCAN, start, count, int(scan.reverse), int(scan.fn == "prod"), 0]


def stage_lines(
    plan: Plan, stage: StagePlan, genome: CppGenome, names: Names, constants: list[str]
) -> tuple[list[str], list[str]]:
    s = stage.index
    leaves = r.stored_before(plan, stage)
    stores = tuple(
        dict.fromkeys((*stage.gemm_stores, *(n for n in stage.outs if n in stage.phase0)))
    )
    buffers = tuple(dict.fromkeys((*stores, *stage.col_outs, *stage.outs, *stage.post_outs)))
    sc = StageCode(plan, stage, names, leaves, outputs=[f"b{n}" for n in buffers])
    epi = _epilogue(sc, stores)  # the GEMM kernel computes the stores
    sc.leaves = leaves | set(stores)  # the second pass reads them back
    steps, n_col, bits = [], 0, 0  # passes: 2 columns, 1 rows, 8 whole rows, 4 the last
    if stage.col_tail:  # column statistics first; the row pass reads their buffers
        first = stage.column_pass()
        steps = _pass_steps(sc, first)
        n_col, bits = len(steps), PASS_BITS["col"]
        sc.leaves = sc.leaves | set(first.outs)
    main = _pass_steps(sc, stage)
    steps += main
    if stage.axis == "col":
        n_col += len(main)
    bits |= PASS_BITS[stage.axis] if stage.tail else 0
    n_row = len(steps) - n_col
    if stage.row2_tail:  # whole rows after the segments: reads what that pass wrote
        sc.leaves = sc.leaves | {n for n in stage.outs if n not in stage.row2_tail}
        steps += _pass_steps(sc, stage.whole_row_pass())
        bits |= PASS_BITS["whole"]
    n_row2 = len(steps) - n_col - n_row
    if stage.post_tail:  # over the rows of the row pass's results, in one thread
        sc.leaves = sc.leaves | set(stage.outs)
        steps += _pass_steps(sc, stage.final_pass())
        bits |= PASS_BITS["post"]
    code = sc.resolve()
    a_lines, a = r.a_operand(plan, stage)
    g = stage.gemm
    layout = g.b_layout
    if g.anchor or g.window is not None:  # no GEMM (anchor, window): B is never read
        w_line, layout = f"w{s} = a{s}", "kn"
    else:
        derive = ".float()" if plan.graph.low_precision else ""  # a float32 copy, kept
        if genome.weight_layout == "kn" and layout == "nk" and not g.batched:
            derive, layout = derive + ".t().contiguous()", "kn"
        if g.b.startswith("self.") and not g.batched and derive:
            w_line = f'w{s} = self._kf_derived("_kf_w{s}", {g.b}, lambda w: w{derive})'
        else:
            w_line, layout = f"w{s} = {g.b}", g.b_layout
    what = f"{g.window.fn} pooling" if g.window else "GEMM"
    what += (" + pooling" if stage.pool else "") + " + epilogue"
    what += f" + {stage.axis} statistics" if stage.tail else ""
    rest = [f"# stage {s}: {what}", w_line, *r.stage_sizes(plan, stage, a, f"w{s}", layout)]
    pre_start, pre_n, post_start, post_n, pool_fn, pool_src, pool_dst = epi
    sizes = [f"BT{s}", f"M{s}", f"N{s}", f"K{s}", f"NC{s}", "R", f"SEG{s}", "G", f"POOL{s}", "BR"]
    rest.append(r.rows_per_batch(plan, stage))
    layout_values = [
        *(pool_fn, pool_src, pool_dst, _layout_code(g, layout)),
        *(genome.block_m, genome.block_n, genome.block_k, genome.parallel_work),
        *(pre_start, pre_n, post_start, post_n),
        *(bits, len(steps), max(1, len(sc.regs))),
        *(v for step in steps for v in step),
        len(buffers),
        *(KIND_CODE[plan.kind(n)] + 16 * _output_code(plan, n) for n in buffers),
        n_col,
        n_row,
        n_row2,
        *_window_spec(g, s, sc.scalars),
    ]
    constants.append(f"_CODE{s} = torch.tensor({code or [0] * 5}, dtype=torch.int64)")
    constants.append(f"_LAYOUT{s} = torch.tensor({layout_values}, dtype=torch.int64)")
    outs = ", ".join(f"b{n}" for n in buffers) + ("," if len(buffers) == 1 else "")
    call = (
        f"{outs} = _ext.gemm_stage(a{s}, w{s}, [{', '.join(sc.tensors)}], "
        f"[{', '.join(sc.scalars)}], _CODE{s}, [{', '.join(sizes)}], _LAYOUT{s})"
    )
    return a_lines, [*rest, call]


def _layout_code(g: Gemm, layout: str) -> int:
    """The library's kn: 0 B stored [N, K], 1 [K, N], 2 no GEMM (an anchor), 3 a window."""
    return 3 if g.window is not None else 2 if g.anchor else int(layout == "kn")


def _window_spec(g: Gemm, s: int, scalars: list[str]) -> list[int]:
    """A window stage's spec after the layout (fn, count_include_pad, dims, first scalar);
    its sizes go to the scalars (per spatial dim kernel, stride, padding, dilation, then the
    pooled sizes), made by the forward's window lines."""
    w = g.window
    if w is None:
        return []
    first = len(scalars)
    for i in range(w.dims):
        scalars += [f"float({name}{s}[{i}])" for name in ("wk", "ws", "wp", "wd")]
    scalars += [f"float(po{s}[{i}])" for i in range(w.dims)]
    return [0 if w.fn == "max" else 1, int(w.count_include_pad), w.dims, first]


def _output_code(plan: Plan, node: int) -> int:
    """What the library makes of a buffer at the end: 1 int64 (the program's output where it
    is indices), 2 float16, 3 bfloat16 (a low-precision program's output), else 0 (float32)."""
    graph = plan.graph
    if node != graph.output:
        return 0
    if graph.int_output:
        return 1
    return {"float16": 2, "bfloat16": 3}.get(graph.dtype, 0)


def render_cpp(plan: Plan, genome: CppGenome, problem_source: str, doc: str) -> str:
    names = Names()
    r.draw_first(plan, names)
    constants: list[str] = []
    parts = [stage_lines(plan, st, genome, names, constants) for st in plan.stages]
    body = [*parts[0][0], r.groups_line(plan), *r.inner_lines(plan)]
    body += r.leaf_prep(names.tensors, contiguous=False)
    for i, (a_lines, rest) in enumerate(parts):
        body += (a_lines if i else []) + rest
    body += r.update_lines(plan)
    body.append(r.output_line(plan))
    return r.render_template(
        "cpp/module.py.j2",
        doc=doc,
        model=model_source(problem_source),
        library=library_source(),
        extension=EXTENSION,
        cflags=CFLAGS,
        constants=constants,
        derived=any("_kf_derived" in line for line in body),
        dropout=any("_kf_dropout_mask" in line for line in body),
        sum_n=any("_kf_sum_n" in line for line in body),
        body="\n".join(body),
    )
