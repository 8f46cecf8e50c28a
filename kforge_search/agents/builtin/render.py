"""Shared pieces of rendering: the Jinja2 environment, node schedules, forward preludes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import jinja2

from kforge_search.agents.builtin.dims import canonical, is_col, rank
from kforge_search.agents.builtin.ir import Gemm, Graph, Kind, Load, Scalar
from kforge_search.agents.builtin.plan import Plan, StagePlan, closure

TEMPLATES = Path(__file__).resolve().parent / "templates"
_lock = threading.Lock()
_loaded: dict[str, jinja2.Environment] = {}


def environment() -> jinja2.Environment:
    """The synthesizer's templates, read and compiled once (under a lock) and then served
    from memory: bench jobs render from several threads at once, and a template must not be
    looked up on disk again mid-render (a file briefly missing or changing, or two threads
    loading it, once gave `TemplateNotFound: triton/gemm.py.j2` on the H100)."""
    env = _loaded.get("env")
    if env is not None:
        return env
    with _lock:
        if "env" not in _loaded:
            sources = {
                path.relative_to(TEMPLATES).as_posix(): path.read_text()
                for path in sorted(TEMPLATES.rglob("*.j2"))
            }
            env = jinja2.Environment(
                loader=jinja2.DictLoader(sources),
                undefined=jinja2.StrictUndefined,
                keep_trailing_newline=True,
                autoescape=False,
                auto_reload=False,
                cache_size=-1,  # never evicted: every template stays compiled
            )
            for name in sources:  # compiled now, not by the first thread that renders it
                env.get_template(name)
            _loaded["env"] = env
    return _loaded["env"]


def render_template(template: str, **values: Any) -> str:
    return environment().get_template(template).render(**values)


def schedule(graph: Graph, targets: tuple[int, ...], have: set[int], leaves: set[int]) -> list[int]:
    """Ids to compute for `targets`, in graph order: `have` are computed already (left
    out), `leaves` are read from buffers (kept, their inputs not followed)."""
    return closure(graph, targets, have, leaves)


def stored_before(plan: Plan, stage: StagePlan) -> set[int]:
    """Buffers written by earlier stages (every stage's outs and GEMM stores)."""
    found: set[int] = set()
    for s in plan.stages[: stage.index]:
        found.update(s.outs, s.gemm_stores, s.post_outs)
    return found


def buffer_shape(kind: Kind, stage: int, swapped: bool = False) -> str:
    """A buffer's shape; [rows, cols] values of a stage read in place with its input's
    leading dims swapped (Gemm.swap_of) in that input's layout, rows of its first dim."""
    if swapped and kind is Kind.MAT:
        return f"(NC{stage} // PLANE, R * PLANE)"
    return {
        Kind.MAT: f"(R, NC{stage})",
        Kind.ROW: "(R,)",
        Kind.SEG: "(R, G)",
        Kind.COL: f"(NC{stage},)",
        Kind.ONE: "()",
        Kind.BCOL: f"(R // BR, NC{stage})",
    }[kind]


def output_line(plan: Plan, swapped: bool = False) -> str:
    """The return statement: the output buffer, viewed as the reference's shape (permuted
    when the output's dims come in another order than the kernels', e.g. (1, N, B, 1)).
    `swapped`: the buffer is in the layout of an input read with its first two dims swapped
    (Gemm.swap_of): the kernels' rows (L0) after their first column dim (C)."""
    out = f"b{plan.graph.output}"
    dims = plan.graph.out_dims
    if swapped:
        tokens = [t for t in dims if t != 1]
        order = ["C", "L0", *(t for t in sorted(tokens, key=rank) if t not in ("C", "L0"))]
        if order == tokens:
            return f"return {out}.view({out_view(plan)})"
        perm = ", ".join(str(order.index(t)) for t in tokens)
        sizes = ", ".join(_size_expr(plan, t) for t in order)
        return f"return {out}.view({sizes}).permute({perm}).view({out_view(plan)})"
    if plan.graph.out_shape:
        return f"return {out}.view({plan.graph.out_shape})"
    if dims == ("L0", "C") or dims == ("L0",):
        return f"return {out}"  # the buffer already has this shape
    if not dims:
        return f"return {out}.view(())"
    if canonical(dims):
        return f"return {out}.view({out_view(plan)})"
    tokens = [t for t in dims if t != 1]
    order = sorted(tokens, key=rank)
    perm = ", ".join(str(order.index(t)) for t in tokens)
    sizes = ", ".join(_size_expr(plan, t) for t in order)
    return f"return {out}.view({sizes}).permute({perm}).view({out_view(plan)})"


def draw_first(plan: Plan, names: Any) -> None:
    """Name the random draws (dropout masks) first, in graph order: the forward draws them
    before anything else, in the reference's order."""
    for node in plan.graph.nodes:
        if isinstance(node, Load) and node.tensor.startswith("_kf_dropout_mask("):
            names.tensor(node.tensor, node.kind)


def update_lines(plan: Plan) -> list[str]:
    """Buffers the forward updates in place, after its kernels: copies of computed values
    (allowed: copies) and counters set to their value plus one (a fill)."""
    lines = []
    for u in plan.graph.updates:
        if u.node >= 0:
            lines.append(f"{u.target}.copy_(b{u.node})")
        else:
            lines.append(f"{u.target}.fill_(int({u.target}) + 1)")
    return lines


def _size_expr(plan: Plan, token: str | int) -> str:
    stage = plan.stage_of[plan.graph.output]
    if token == 1:
        return "1"
    if str(token).startswith("L"):
        return f"lead[{str(token)[1:]}]"
    if is_col(token) and plan.graph.col_sizes:  # columns made of an input's trailing dims
        return plan.graph.col_sizes[int(str(token)[1:] or 0)]
    return {"C": f"NC{stage}", "G": "G", "S": f"SEG{stage}"}[str(token)]


def out_view(plan: Plan) -> str:
    """The output's shape as forward-side expressions."""
    return ", ".join(_size_expr(plan, t) for t in plan.graph.out_dims)


def leaf_prep(
    names_tensors: dict[tuple[str, Kind], str],
    contiguous: bool = True,
    swapped: dict[str, str] | None = None,
) -> list[str]:
    """Leaves, made contiguous (kernels index them flat, rows of their last dim) unless the
    library does that itself. `swapped` (name -> input): inputs read in place with their
    leading dims swapped (Gemm.swap_of), passed as rows of their first dim."""
    tail = ".contiguous()" if contiguous else ""
    swapped = swapped or {}

    # a full-size leaf is read as the space's rows (R of them, defined before) of columns:
    # rows of its last dim, or of its last dims where those together are the columns
    def prep(expr: str, kind: Kind, name: str) -> str:
        if name in swapped:
            return f"{swapped[name]}.reshape({swapped[name]}.shape[0], -1){tail}"
        return f"{expr}{'.reshape(R, -1)' if kind is Kind.MAT else ''}{tail}"

    return [f"{name} = {prep(expr, kind, name)}" for (expr, kind), name in names_tensors.items()]


def stage_sizes(
    plan: Plan, stage: StagePlan, a: str, w: str, layout: str, in_place: bool = False
) -> list[str]:
    """Forward lines naming the stage's sizes: M, K, N, pooling, NC, SEG. `in_place`: an
    input read with its leading dims swapped is `a` itself (a_operand)."""
    s = stage.index
    g = stage.gemm
    if g.swap_of and in_place:  # R rows (the input's dim 1) of the rest of the input
        lines = [f"M{s}, K{s} = R, 1", f"BT{s} = 1", f"N{s} = {a}.numel() // R"]
        return [*lines, f"POOL{s} = 1", f"NC{s} = N{s}", _seg_line(plan, s)]
    if g.window is not None:  # the pooled output: R rows of its last dim, K per window
        volume = " * ".join(_int(k) for k in g.window.kernel)
        lines = [f"M{s}, K{s} = R, {volume}", f"BT{s} = 1", f"N{s} = po{s}[-1]"]
        return [*lines, f"POOL{s} = 1", f"NC{s} = N{s}", _seg_line(plan, s)]
    if g.anchor:  # the tile is `a` itself: M rows of N columns, nothing contracted
        lines = [f"M{s}, K{s} = {a}.shape[-2], 1", f"BT{s} = 1", f"N{s} = {a}.shape[-1]"]
        return [*lines, f"POOL{s} = 1", f"NC{s} = N{s}", _seg_line(plan, s)]
    lines = [f"M{s}, K{s} = {a}.shape[-2], {a}.shape[-1]"]
    lines.append(f"BT{s} = {a}.shape[0]" if g.batched else f"BT{s} = 1")
    lines.append(f"N{s} = {w}.shape[-2]" if layout == "nk" else f"N{s} = {w}.shape[-1]")
    pool = stage.pool
    if pool is not None:
        k = pool.k.source or repr(int(pool.k.value))
        lines.append(f"POOL{s} = int({k})")
        lines.append(f"NC{s} = N{s} // POOL{s}")
    else:
        lines += [f"POOL{s} = 1", f"NC{s} = N{s}"]
    lines.append(_seg_line(plan, s))
    return lines


def _seg_line(plan: Plan, s: int) -> str:
    return f"SEG{s} = NC{s} // G" if plan.graph.groups is not None else f"SEG{s} = NC{s}"


def groups_line(plan: Plan) -> str:
    groups = plan.graph.groups
    if groups is None:
        return "G = 1"
    return f"G = int({groups.source or repr(int(groups.value))})"


def inner_lines(plan: Plan) -> list[str]:
    """Forward lines naming the divisors of per-column vectors broadcast along the inner
    columns (Load.inner): INNER<k>, the product of the sizes of the last k column tokens."""
    found = sorted({n.inner for n in plan.graph.nodes if isinstance(n, Load) and n.inner})
    sizes = plan.graph.col_sizes
    return [f"INNER{k} = {' * '.join(sizes[-k:])}" for k in found]


def a_operand(plan: Plan, stage: StagePlan, in_place: bool = False) -> tuple[list[str], str]:
    """Forward lines making the stage's A operand, and its name. `in_place`: an anchor over
    an input's swapped leading dims (Gemm.swap_of) is that input, PLANE its runs' length."""
    g = stage.gemm
    s = stage.index
    if g.window is not None:
        return window_lines(g, s), f"a{s}"
    if g.swap_of and in_place:
        x = g.swap_of
        return [
            f"a{s} = {x}  # read in place: rows are its dim 1",
            f"lead = {x}.shape[1:2]",
            f"R = {x}.shape[1]",
            f"PLANE = {x}.shape[2:].numel()",
        ], f"a{s}"
    if isinstance(g.a, str) and g.anchor and g.cols_from >= 0:  # an input, its columns given
        k = g.cols_from
        return [
            f"a{s} = {g.a}.reshape(-1, {g.a}.shape[{k}:].numel())",
            f"lead = {g.a}.shape[:{k}]",
            f"R = a{s}.shape[0]",
        ], f"a{s}"
    if isinstance(g.a, str):
        if not g.batched and plan.graph.n_lead == 1:
            return [f"a{s} = {g.a}", f"lead = {g.a}.shape[:-1]", f"R = a{s}.shape[0]"], f"a{s}"
        if g.batched:
            return [
                f"a{s} = {g.a}",
                f"lead = {g.a}.shape[:-1]",
                f"R = a{s}.shape[0] * a{s}.shape[1]",
            ], f"a{s}"
        return [
            f"a{s} = {g.a}.reshape(-1, {g.a}.shape[-1])",
            f"lead = {g.a}.shape[:-1]",
            f"R = a{s}.shape[0]",
        ], f"a{s}"
    if g.batched:
        return [f"a{s} = b{g.a}.view(lead[0], lead[1], -1)"], f"a{s}"
    return [f"a{s} = b{g.a}"], f"a{s}"


def _int(value: Scalar) -> str:
    return f"int({value.source})" if value.source else repr(int(value.value))


def window_lines(g: Gemm, s: int) -> list[str]:
    """Forward lines of a window stage: its input `a{s}` (read through its strides), the
    window's sizes per spatial dim (wk kernel, ws stride, wp padding, wd dilation), the
    pooled sizes `po{s}` (torch's rule: ceil_mode windows start within the input or its left
    padding), the output's leading dims and R, the rows of the tile."""
    w = g.window
    assert w is not None and isinstance(g.a, str)
    a, n = f"a{s}", w.dims

    def each(values: tuple[Scalar, ...]) -> str:
        return "(" + ", ".join(_int(v) for v in values) + ",)"

    sizes = f"zip({a}.shape[-{n}:], wk{s}, ws{s}, wp{s}, wd{s})"
    up = " + st - 1" if w.ceil_mode else ""
    lines = [
        f"{a} = {g.a}",
        f"wk{s}, ws{s}, wp{s}, wd{s} = {each(w.kernel)}, {each(w.stride)}, "
        f"{each(w.padding)}, {each(w.dilation)}",
        f"po{s} = tuple((n + 2 * p - d * (k - 1) - 1{up}) // st + 1 for n, k, st, p, d in {sizes})",
    ]
    if w.ceil_mode:
        lines.append(
            f"po{s} = tuple(o - int((o - 1) * st >= n + p) "
            f"for o, (n, k, st, p, d) in zip(po{s}, {sizes}))"
        )
    return [*lines, f"lead = (*{a}.shape[:-{n}], *po{s}[:-1])", "R = torch.Size(lead).numel()"]


def rows_per_batch(plan: Plan, stage: StagePlan) -> str:
    """BR, the rows of one batch, where a value is per column of each batch (Kind.BCOL: a
    column statistic over the last leading dim, or an input broadcast along it, [B, 1, C]
    beside [B, D, C]); else every row (BR unused)."""
    batched = stage.batched_cols or any(n.kind is Kind.BCOL for n in plan.graph.nodes)
    return "BR = lead[-1]" if batched else "BR = R"
