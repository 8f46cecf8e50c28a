"""The kernels of one stage as Triton source: the GEMM tile kernel (its epilogue, pooling,
fused tail or split-K modes) and the second pass over rows or columns, from templates."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from kforge_search.agents.builtin import render as r
from kforge_search.agents.builtin.arg_walk import arg_pairs, arg_step
from kforge_search.agents.builtin.genome import TritonGenome
from kforge_search.agents.builtin.ir import Ew, Graph, Scan, Stat
from kforge_search.agents.builtin.ops import REDUCTIONS
from kforge_search.agents.builtin.plan import Plan, StagePlan, scan_outs
from kforge_search.agents.builtin.triton_lines import Lines, Names, Params, signature
from kforge_search.agents.builtin.walk_steps import VECTOR_KINDS, ScanStep, Step


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str
    params: tuple[str, ...]

    def args(self) -> list[str]:
        return [f"{p[3:]}.shape[-1]" if p.startswith("ld_") else p for p in self.params]


def low_dot(plan: Plan, stage: StagePlan) -> str:
    """The dtype of a float16 / bfloat16 program's GEMM tiles ("" for float32 programs and
    stages without a GEMM): dots of that dtype into a float32 accumulator."""
    g = stage.gemm
    if not plan.graph.low_precision or g.anchor or g.window is not None:
        return ""
    return plan.graph.dtype


def tma_capable(stage: StagePlan) -> bool:
    """Whether the stage's operand tiles can come through TMA descriptors: 2-D operands
    and whole column tiles (pooling reads strided columns; batches have a third dimension).
    An anchor has no operands to stream."""
    g = stage.gemm
    return not g.batched and stage.pool is None and not g.anchor and g.window is None


def presplit_capable(stage: StagePlan) -> bool:
    """Whether the stage's B can be split into tf32 hi + lo once: a parameter, not batched."""
    return stage.gemm.b.startswith("self.") and not stage.gemm.batched


def promoted(genome: TritonGenome) -> bool:
    """Whether the K loop's dots accumulate a partial sum over `promote` k blocks, added to
    the running sum in fp32: the three-dot schemes other than Triton's own tf32x3."""
    return genome.precision == "bf16x3" or (
        genome.precision == "tf32x3" and genome.x3 == "presplit"
    )


def uses_presplit(stage: StagePlan, genome: TritonGenome) -> bool:
    """Whether B comes as hi + lo made once (else a bf16x3 kernel splits B per k step)."""
    return promoted(genome) and presplit_capable(stage)


def uses_tma(stage: StagePlan, genome: TritonGenome, mode: str) -> bool:
    return genome.loads == "tma" and mode != "reduce" and tma_capable(stage)


def gemm_kernel(
    plan: Plan,
    stage: StagePlan,
    genome: TritonGenome,
    names: Names,
    name: str,
    mode: str,
    targets: tuple[int, ...],
    leaves: set[int],
    b_kn: bool = False,
) -> Kernel:
    graph, g, pool = plan.graph, stage.gemm.id, stage.pool
    params = Params()
    lines = Lines(graph, "tile", names, params, leaves, bool(stage.gemm.swap_of))
    anchor = stage.gemm.anchor
    tile = lines.compute(g) if anchor else f"v{g} = acc"  # an anchor's tile is loaded
    have, pre, pool_vars = {g}, [], None
    if mode != "partial" and pool is not None:
        pre_ids = r.schedule(graph, (pool.x,), have, leaves)
        pre = [tile] + [lines.compute(n) for n in pre_ids]
        pool_vars = {
            "init": "float('-inf')" if pool.fn == "max" else "0.0",
            "combine": f"tl.maximum(pooled, v{pool.x})"
            if pool.fn == "max"
            else f"pooled + v{pool.x}",
            "finish": " / POOL_K" if pool.fn == "avg" else "",
            "out": f"v{pool.id}",
            "x": f"v{pool.x}",
            "reduce": "max" if pool.fn == "max" else "sum",
        }
        have = {pool.id}
    post_ids = r.schedule(graph, targets, have, leaves) if mode != "partial" else []
    post = ([] if pool is not None else [tile]) + [lines.compute(n) for n in post_ids]
    stores = [lines.store(n) for n in targets] if mode != "partial" else []
    lowp = None
    if low_dot(plan, stage):  # A from an input is in the dtype, from a buffer float32
        lowp = {"dtype": graph.dtype, "a_f32": isinstance(stage.gemm.a, int)}
    source = r.render_template(
        "triton/gemm.py.j2",
        name=name,
        mode=mode,
        params=signature(params.names),
        batched=stage.gemm.batched,
        anchor=anchor,
        narrow=anchor and stage.gemm.window is None and mode == "full",
        precision=genome.precision,
        presplit=uses_presplit(stage, genome),
        promoted=promoted(genome),
        tma=uses_tma(stage, genome, mode),
        b_kn=b_kn,
        pool=pool_vars,
        lowp=lowp,
        window=_window_vars(stage),
        pre_lines="\n".join(pre),
        post_lines="\n".join(post),
        store_lines="\n".join(stores),
    )
    return Kernel(name, source, tuple(params.names))


def _window_vars(stage: StagePlan) -> dict[str, object] | None:
    """The window reduction a window stage's tile kernel computes in place of a K loop."""
    w = stage.gemm.window
    if w is None:
        return None
    return {"dims": w.dims, "fn": w.fn, "include_pad": w.count_include_pad}


def pass_kernel(plan: Plan, stage: StagePlan, names: Names, name: str, leaves: set[int]) -> Kernel:
    steps, params = _pass_steps(plan, stage, names, leaves)
    if stage.axis == "row":
        steps = one_walk(plan.graph, steps)
    source = r.render_template(
        f"triton/{stage.axis}s.py.j2",
        name=name,
        params=signature(params.names),
        steps=steps,
        once=_once(steps) if stage.axis == "col" else [],
    )
    return Kernel(name, source, tuple(params.names))


def _once(steps: list[Step]) -> list[str]:
    """Each step's lines less the assignments an earlier step already made (the same line:
    one node's value, `v<id> = ...`): a column pass's steps as one straight run over a tile
    held for all of them (cols.py.j2, ONE) load and compute each value once."""
    seen: set[str] = set()
    out = []
    for step in steps:
        kept = []
        for line in step.lines.splitlines():
            if re.match(r"v\d+ = ", line) and line in seen:
                continue
            seen.add(line)
            kept.append(line)
        out.append("\n".join(kept))
    return out


def splittable(plan: Plan, stage: StagePlan) -> bool:
    """Whether a row pass can walk each (row, segment) in parts (split_pass_kernels): its
    statistics are sums, maxima and minima (each part's result combines), no scan, and no
    argmax / argmin in one walk (its parts would need their keys, not their indices)."""
    return (
        stage.axis == "row"
        and not any(isinstance(plan.graph.node(n), Scan) for n in stage.tail)
        and not arg_pairs(plan.graph, stage)
    )


def _ancestors(graph: Graph, ids: set[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(ids)
    while todo:
        for d in graph.deps(graph.node(todo.pop())):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def _own_accumulator(step: Step) -> Step:
    """A plain statistic's step with its accumulator `acc` renamed `a<node>`."""
    return dataclasses.replace(step, combine=step.combined(f"a{step.node}", step.acc))


def one_walk(graph: Graph, steps: list[Step]) -> list[Step]:
    """A row pass's plain statistics that read none of an earlier plain statistic's, made
    in its walk: one read of the row for all of them, where each walked it again (a triplet
    loss's two distances: H200, 99_TripletMarginLoss 0.89x -> 1.01x of compile; a cosine
    similarity's dot product and norms). Once-per-row steps between them that read none of
    the walk's statistics go before it. Not into an online walk (max and sum of exp): cross
    entropy's target logit made there took 95_CrossEntropyLoss from 0.63x to 0.54x (H200;
    three accumulators of a 4096-wide block, one of them float64, in one loop)."""
    out: list[Step] = []
    i = 0
    while i < len(steps):
        walk = steps[i]
        j = i + 1
        if walk.kind == "stat":
            stats, before, extra = set(walk.made), [], []
            while j < len(steps) and not (steps[j].made | _ancestors(graph, steps[j].made)) & (
                stats - {steps[j].node}
            ):
                if steps[j].kind == "top" and steps[j].nodes:  # (a store's nodes: its values)
                    before.append(steps[j])
                elif steps[j].kind == "stat" and not steps[j].extra:
                    # a value the walk already has (its loaded elements) is not made again
                    have = {ln for s in (walk, *extra) for ln in s.lines.splitlines()}
                    lines = "\n".join(ln for ln in steps[j].lines.splitlines() if ln not in have)
                    extra.append(_own_accumulator(dataclasses.replace(steps[j], lines=lines)))
                    stats.add(steps[j].node)
                else:
                    break
                j += 1
            if extra:
                out.extend(before)
                out.append(dataclasses.replace(walk, extra=tuple(extra)))
                i = j
                continue
            j = i + 1
        out.append(walk)
        i = j
    return out


# A split pass's walks and how a later kernel takes their statistics from the parts' results
LOADED = {"stat": "stat_load", "online": "online_load", "moments": "moments_load"}


def split_pass_kernels(
    plan: Plan, stage: StagePlan, names: Names, name: str, leaves: set[int]
) -> tuple[list[Kernel], list[tuple[str, str]]]:
    """A row pass as one kernel per statistic and a last one, each program walking one part
    of a (row, segment): kernel k combines the statistics before k from the parts' results
    (a workspace per statistic, `pws<node>`), then stores its part's result for statistic k;
    the last combines them all and makes its part's outputs. A pass over a few long rows
    (LayerNorm of 16 rows of 4M elements: 16 programs, 1% of the H200's roofline) gets
    parts x more programs; each statistic's walk reads the row once, as in one kernel.
    Returns the kernels and the workspaces (name, torch dtype: float64, the sums' own)."""
    steps, params = _pass_steps(plan, stage, names, leaves)
    stats = [i for i, step in enumerate(steps) if step.kind in LOADED]
    ws = [  # "online" and "moments": both statistics' partial results (the parts combine)
        f"pws{n}"
        for i in stats
        for n in ((steps[i].best, steps[i].node) if steps[i].best >= 0 else (steps[i].node,))
    ]
    kernels = []
    for k, last in enumerate([*stats, len(steps)]):
        mine = [
            dataclasses.replace(step, kind=LOADED[step.kind]) if step.kind in LOADED else step
            for step in steps[:last]
        ] + ([steps[last]] if last < len(steps) else [])  # the last: every statistic loaded
        own = f"{name}_part{k}" if last < len(steps) else f"{name}_final"
        source = r.render_template(
            "triton/rows_split.py.j2", name=own, params=signature([*params.names, *ws]), steps=mine
        )
        kernels.append(Kernel(own, source, (*params.names, *ws)))
    return kernels, [(w, "float64") for w in ws]  # maxima and minima convert exactly


def online_pairs(graph: Graph, stage: StagePlan) -> dict[int, tuple[int, int]]:
    """The row pass's max-then-sum-of-exp statistics (softmax, log-softmax, logsumexp,
    cross entropy: `sum(exp(x - max(x)))`) that one walk can make, by the maximum's id:
    (the sum's id, x's id). Two walks read the row twice before the outputs' walk (H200,
    23_Softmax: 6.1 ms, 0.77x of compile); one keeps a running maximum per lane and rescales
    the lane's sum when it grows (an online softmax), then combines the lanes."""
    if stage.axis != "row":
        return {}
    found, users = {}, graph.users()
    for n in stage.tail:
        best = graph.node(n)
        if isinstance(best, Stat) and best.fn == "max":
            total = _sum_of(graph, users, stage, best, n, "exp")
            if total is not None:
                found[n] = (total, best.x)
    return found


def moments_pairs(graph: Graph, stage: StagePlan) -> dict[int, tuple[int, int, int]]:
    """The row pass's `sum(x)` then `sum((x - m)^2)` with `m` a row value made from the
    first sum alone (LayerNorm, InstanceNorm, GroupNorm, BatchNorm, variance), by the first
    sum's id: (the second's id, x's id, m's id). One walk keeps sum(x) and sum(x^2) in
    float64; the second is sum(x^2) - 2 m sum(x) + n m^2, the same sum for that m."""
    if stage.axis != "row":
        return {}
    found, users = {}, graph.users()
    for n in stage.tail:
        first = graph.node(n)
        if not isinstance(first, Stat) or first.fn != "sum":
            continue
        for mean_id in users[n]:
            mean = graph.node(mean_id)
            if (  # m: a row value of the sum alone (scalars and sizes beside it)
                isinstance(mean, Ew)
                and mean.kind not in VECTOR_KINDS["row"]
                and mean.args[0] == n
                and not any(isinstance(a, int) for a in mean.args[1:])
            ):
                second = _sum_of(graph, users, stage, first, mean_id, "square")
                if second is not None and n not in found:
                    found[n] = (second, first.x, mean_id)
    return found


def _sum_of(
    graph: Graph, users: dict[int, list[int]], stage: StagePlan, stat: Stat, of: int, fn: str
) -> int | None:
    """The id of a statistic of the pass `sum(fn(x - of))`, x the statistic `stat`'s own
    input, over the same rows and segments; None where the graph has none."""
    for sub_id in users[of]:
        sub = graph.node(sub_id)
        if not (isinstance(sub, Ew) and sub.fn == "sub" and sub.args == (stat.x, of)):
            continue
        for f_id in users[sub_id]:
            f = graph.node(f_id)
            if not (isinstance(f, Ew) and f.fn == fn and f.args == (sub_id,)):
                continue
            for total_id in users[f_id]:
                total = graph.node(total_id)
                if (
                    isinstance(total, Stat)
                    and total.fn == "sum"
                    and (total.axis, total.groups) == (stat.axis, stat.groups)
                    and total_id in stage.tail
                ):
                    return total_id
    return None


def _pass_steps(
    plan: Plan, stage: StagePlan, names: Names, leaves: set[int]
) -> tuple[list[Step], Params]:
    graph, dialect = plan.graph, stage.axis
    params = Params()
    lines = Lines(graph, dialect, names, params, leaves, bool(stage.gemm.swap_of))
    vector = VECTOR_KINDS[dialect]
    mask = "mask_c" if dialect == "row" else "mask_r[:, None] & mask_c[None, :]"
    have: set[int] = set()
    steps: list[Step] = []

    def split(ids: list[int]) -> tuple[list[int], list[int]]:
        top = [n for n in ids if graph.node(n).kind not in vector]
        if top:
            steps.append(Step("top", "\n".join(lines.compute(n) for n in top), nodes=tuple(top)))
            have.update(top)
        return top, [n for n in ids if graph.node(n).kind in vector]

    leaves = set(leaves)  # and scans that later steps read back (`lines` shares the set)
    lines.buffered = leaves
    done: set[int] = set()  # outputs a scan's walk stored
    pairs = arg_pairs(graph, stage)
    within = {p.best for p in pairs.values()}  # made in their argmax's walk: never alone
    sums = online_pairs(graph, stage)
    within |= {total for total, _ in sums.values()}  # made in their maximum's walk
    moments = moments_pairs(graph, stage)
    within |= {second for second, _, _ in moments.values()}  # made in the first sum's walk
    for stat_id in (n for n in stage.tail if isinstance(graph.node(n), Stat | Scan)):
        stat = graph.node(stat_id)
        if isinstance(stat, Scan):
            steps.append(_scan_step(plan, stage, lines, stat, have, done, split))
            continue
        assert isinstance(stat, Stat)
        if stat_id in within:
            continue
        if stat_id in moments:
            second, x, mean = moments[stat_id]
            _, loop = split(r.schedule(graph, (x,), have, leaves))
            body = "\n".join(lines.compute(m) for m in loop)
            made = r.schedule(graph, (mean,), have | {stat_id}, leaves)
            after = "\n".join(lines.compute(m) for m in made)
            steps.append(
                Step("moments", body, second, best=stat_id, x=f"v{x}", mean=mean, after=after)
            )
            have.update({stat_id, second, *made})
            continue
        if stat_id in sums:
            total, x = sums[stat_id]
            _, loop = split(r.schedule(graph, (x,), have, leaves))
            body = "\n".join(lines.compute(m) for m in loop)
            steps.append(Step("online", body, total, best=stat_id, x=f"v{x}"))
            have.update({stat_id, total})
            continue
        if stat_id in pairs:
            pos = graph.node(pairs[stat_id].pos)
            assert isinstance(pos, Ew) and isinstance(pos.args[0], int)
            _, loop = split(r.schedule(graph, (pos.args[0],), have, leaves))
            steps.append(arg_step(lines, stat, pairs[stat_id], loop, mask))
            have.add(stat_id)
            continue
        pick = picked(graph, stage, stat)
        if pick is not None:
            _, loop = split(r.schedule(graph, (pick.args[0], pick.args[1]), have, leaves))
            steps.append(_pick_step(lines, stat, pick, loop))
            have.add(stat_id)
            continue
        _, loop = split(r.schedule(graph, (stat.x,), have, leaves))
        red = REDUCTIONS[stat.fn]
        masked = f"tl.where({mask}, v{stat.x}, {red.identity})"
        steps.append(
            Step(
                "stat",
                "\n".join(lines.compute(n) for n in loop),
                stat_id,
                red.identity,
                red.combine.format("acc", f"{masked}.to({red.acc})"),
                red.finish,
                acc=red.acc,
                fold=red.combine,
                value=masked,
            )
        )
        have.add(stat_id)
    outs = [n for n in stage.outs if n in stage.tail and n not in done]
    scalar_outs = tuple(n for n in outs if graph.node(n).kind not in vector)
    if scalar_outs:
        split(r.schedule(graph, scalar_outs, have, leaves))
        stores = "\n".join(lines.store(n) for n in scalar_outs)
        steps.append(Step("top", stores, nodes=scalar_outs))
    vector_outs = tuple(n for n in outs if graph.node(n).kind in vector)
    if vector_outs:
        _, loop = split(r.schedule(graph, vector_outs, have, leaves))
        body = [lines.compute(n) for n in loop] + [lines.store(n) for n in vector_outs]
        steps.append(Step("final", "\n".join(body)))
    return steps, params


def picked(graph: Graph, stage: StagePlan, stat: Stat) -> Ew | None:
    """The `pick_col(x, t, 0)` a row pass's sum is of (cross entropy's target logit: x at
    the row's class index t, 0 elsewhere), whose one element the pass loads where a walk
    read the row again (H100, 32768 rows of 4096: the kernel timed alone took 0.25 ms with
    the walk and 0.19 with the load); None for any other statistic."""
    x = graph.node(stat.x)
    if not (stage.axis == "row" and stat.fn == "sum" and isinstance(x, Ew)):
        return None
    if x.fn != "pick_col" or not isinstance(x.args[1], int) or graph.users()[x.id] != [stat.id]:
        return None
    return x if graph.node(x.args[1]).kind not in VECTOR_KINDS["row"] else None


def _pick_step(lines: Lines, stat: Stat, pick: Ew, loop: list[int]) -> Step:
    """A once-per-row step: the picked column `pcol` of this segment (`pin`: t falls in
    it), x's values there (its nodes named p<id>, so that no walk's names change type), and
    the statistic: x there, or 0 where t is outside the segment (its sum's other terms)."""
    mine = set(loop)  # (t, a value of the row, was made before: a "top" step's)
    body = "\n".join(lines.compute(m) for m in loop)
    body = re.sub(r"\bv(\d+)\b", lambda m: f"p{m[1]}" if int(m[1]) in mine else m[0], body)
    body = re.sub(r"\bcols\b", "pcol", re.sub(r"\bmask_c\b", "pin", body))
    x, t = pick.args[0], lines.operand(pick.args[1])
    value = f"p{x}" if x in mine else f"v{x}"
    found = [
        f"pcol = {t}.to(tl.int32)",
        "pin = (pcol >= base) & (pcol < base + SEG)",
        *([body] if body else []),
        f"v{stat.id} = tl.where(pin, {value}, 0.0).to(tl.float32)",
    ]
    return Step("top", "\n".join(found), nodes=(stat.id,))


def _scan_step(
    plan: Plan,
    stage: StagePlan,
    lines: Lines,
    scan: Scan,
    have: set[int],
    done: set[int],
    split: Callable[[list[int]], tuple[list[int], list[int]]],
) -> Step:
    """A scan's walk over the row: its input at shifted columns when exclusive, then the
    outputs that need it and no later statistic (written in the same walk), and the scan
    itself when later steps read it back (it joins the leaves)."""
    graph, leaves = plan.graph, lines.buffered
    shift = (-1 if scan.reverse else 1) if scan.exclusive else 0
    _, loop = split(r.schedule(graph, (scan.x,), have, leaves))
    chain = [lines.compute(n) for n in loop]
    here = scan_outs(graph, stage, scan.id, done, have, leaves)
    # the input's values are the outputs' own columns' unless shifted
    known = have | {scan.id} | (set(loop) if not shift else set())
    _, after = split(r.schedule(graph, here, known, leaves))
    body = [lines.compute(n) for n in after] + [lines.store(n) for n in here]
    done.update(here)
    if scan.id in stage.outs:
        leaves.add(scan.id)
    plus = scan.fn == "sum"
    return Step(
        "scan",
        "\n".join(chain),
        scan.id,
        "0.0" if plus else "1.0",
        scan=ScanStep(
            scan.x,
            "cumsum" if plus else "cumprod",
            "+" if plus else "*",
            "tl.float32" if plus else "tl.float64",
            scan.reverse,
            shift,
            "\n".join(body),
        ),
    )
