"""The kernels of one stage as Triton source: the GEMM tile kernel (its epilogue, pooling,
fused tail or split-K modes) and the second pass over rows or columns, from templates."""

from __future__ import annotations

from dataclasses import dataclass

from kforge_search.agents.builtin import render as r
from kforge_search.agents.builtin.genome import TritonGenome
from kforge_search.agents.builtin.ir import Kind, Stat
from kforge_search.agents.builtin.ops import REDUCTIONS
from kforge_search.agents.builtin.plan import Plan, StagePlan
from kforge_search.agents.builtin.triton_lines import Lines, Names, Params

VECTOR_KINDS = {"row": {Kind.MAT, Kind.COL}, "col": {Kind.MAT, Kind.ROW}}


@dataclass(frozen=True)
class Step:
    kind: str  # "top" (once per program), "stat" (a walk accumulating a statistic), "final"
    lines: str
    node: int = -1
    identity: str = ""
    combine: str = ""
    finish: str = ""


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str
    params: tuple[str, ...]

    def args(self) -> list[str]:
        return [f"{p[3:]}.shape[-1]" if p.startswith("ld_") else p for p in self.params]


def tma_capable(stage: StagePlan) -> bool:
    """Whether the stage's operand tiles can come through TMA descriptors: 2-D operands
    and whole column tiles (pooling reads strided columns; batches have a third dimension).
    An anchor has no operands to stream."""
    return not stage.gemm.batched and stage.pool is None and not stage.gemm.anchor


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
    lines = Lines(graph, "tile", names, params, leaves)
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
    source = r.render_template(
        "triton/gemm.py.j2",
        name=name,
        mode=mode,
        params=params.names,
        batched=stage.gemm.batched,
        anchor=anchor,
        precision=genome.precision,
        presplit=uses_presplit(stage, genome),
        promoted=promoted(genome),
        tma=uses_tma(stage, genome, mode),
        b_kn=b_kn,
        pool=pool_vars,
        pre_lines="\n".join(pre),
        post_lines="\n".join(post),
        store_lines="\n".join(stores),
    )
    return Kernel(name, source, tuple(params.names))


def pass_kernel(plan: Plan, stage: StagePlan, names: Names, name: str, leaves: set[int]) -> Kernel:
    graph, dialect = plan.graph, stage.axis
    params = Params()
    lines = Lines(graph, dialect, names, params, leaves)
    vector = VECTOR_KINDS[dialect]
    mask = "mask_c" if dialect == "row" else "mask_r[:, None] & mask_c[None, :]"
    have: set[int] = set()
    steps: list[Step] = []

    def split(ids: list[int]) -> tuple[list[int], list[int]]:
        top = [n for n in ids if graph.node(n).kind not in vector]
        if top:
            steps.append(Step("top", "\n".join(lines.compute(n) for n in top)))
            have.update(top)
        return top, [n for n in ids if graph.node(n).kind in vector]

    for stat_id in (n for n in stage.tail if isinstance(graph.node(n), Stat)):
        stat = graph.node(stat_id)
        assert isinstance(stat, Stat)
        _, loop = split(r.schedule(graph, (stat.x,), have, leaves))
        red = REDUCTIONS[stat.fn]
        masked = f"tl.where({mask}, v{stat.x}, {red.identity})"
        steps.append(
            Step(
                "stat",
                "\n".join(lines.compute(n) for n in loop),
                stat_id,
                red.identity,
                red.combine.format("acc", masked),
                red.finish,
            )
        )
        have.add(stat_id)
    outs = [n for n in stage.outs if n in stage.tail]
    scalar_outs = tuple(n for n in outs if graph.node(n).kind not in vector)
    if scalar_outs:
        split(r.schedule(graph, scalar_outs, have, leaves))
        steps.append(Step("top", "\n".join(lines.store(n) for n in scalar_outs)))
    vector_outs = tuple(n for n in outs if graph.node(n).kind in vector)
    if vector_outs:
        _, loop = split(r.schedule(graph, vector_outs, have, leaves))
        body = [lines.compute(n) for n in loop] + [lines.store(n) for n in vector_outs]
        steps.append(Step("final", "\n".join(body)))
    source = r.render_template(
        f"triton/{dialect}s.py.j2", name=name, params=params.names, steps=steps
    )
    return Kernel(name, source, tuple(params.names))
