"""argmax / argmin in one walk of a second pass (triton_kernels._pass_steps): the IR's two
statistics (the maximum, then the least index where an element equals it) found as a pair,
and the walk that keeps each lane's best value and its index."""

from __future__ import annotations

from dataclasses import dataclass

from kforge_search.agents.builtin.ir import Ew, Graph, Stat
from kforge_search.agents.builtin.ops import T_ARG_DONE
from kforge_search.agents.builtin.plan import StagePlan
from kforge_search.agents.builtin.triton_lines import INDEX, Lines
from kforge_search.agents.builtin.walk_steps import Step


@dataclass(frozen=True)
class ArgPair:
    """argmax / argmin as the IR has it (convert.arg): `best`, the maximum (minimum) of `x`;
    `pos`, each element's index where it equals `best`, else +inf; the min of `pos`."""

    best: int
    pos: int
    fn: str  # "max" or "min": the statistic `best` is


ARG_INDEX = {  # the index along the reduced dim, as the argpos ops compute it
    "argpos_col": "{col}",
    # over a middle dim (convert.arg: lead[-1], n): the column pass walks one batch of
    # BR = lead[-1] = n rows from row0, so the index is the row's place in it, no `% n`
    # (H200, 51's hand walk: 2.66 ms with `% n`, 2.18 without it and in int32 from the batch)
    "argpos_row": "({row} - row0)",
}  # the walk's tl.where broadcasts them: no index per element (`+ 0 * col`)


def arg_pairs(graph: Graph, stage: StagePlan) -> dict[int, ArgPair]:
    """The pass's argmax / argmin statistics that one walk can make (by the min's id): the
    statistic `best` read by nothing but the index's `pos` and not an output. The IR's two
    statistics walk the input twice (H200, 51_Argmax: 4.6 ms where a sum over the same
    input took 2.15); one walk keeps the largest (least) packed key of value and index."""
    if stage.axis not in ("row", "col"):
        return {}
    users, found = graph.users(), {}
    for n in stage.tail:
        stat = graph.node(n)
        if not isinstance(stat, Stat) or stat.fn != "min":
            continue
        pos = graph.node(stat.x)
        if not isinstance(pos, Ew) or pos.fn not in ARG_INDEX or not isinstance(pos.args[1], int):
            continue
        best = graph.node(pos.args[1])
        if (
            isinstance(best, Stat)
            and best.fn in ("max", "min")
            and best.x == pos.args[0]
            and best.id in stage.tail
            and users[best.id] == [pos.id]
            and users[pos.id] == [stat.id]
            and not {best.id, pos.id} & set(stage.outs)
        ):
            found[n] = ArgPair(best.id, pos.id, best.fn)
    return found


def arg_step(lines: Lines, stat: Stat, pair: ArgPair, loop: list[int], mask: str) -> Step:
    """The walk of one argmax / argmin: each lane keeps its best value and that value's
    index (the first of equals: a later one replaces it only where strictly better; NaN
    beats every number, as torch's), then the lanes' pairs become keys, the value's bits made
    to order as the floats do (+0 for -0; NaN the largest for argmax and the least for
    argmin) above the index (argmax: 2**31 - 1 - index, so the first of equals wins), and
    the key reduction picks one. A key per element (64-bit integer work on every element)
    left 51_Argmax at 0.65x of compile on the H200.

    Each lane starts at index 0 with the identity (-inf for argmax): a lane that never takes
    an element claims index 0 with the identity, the right answer where every element is the
    identity and a losing key elsewhere. No per-element test of "nothing seen yet" and no
    index per element (H200, 51's [128, 4096, 4095] over dim 1, 32 x 32 tiles: 3.48 ms with
    both, 2.17 without, compile 2.55)."""
    graph = lines.graph
    pos = graph.node(pair.pos)
    assert isinstance(pos, Ew)
    index = ARG_INDEX[pos.fn].format(**INDEX[lines.dialect])
    better = ">" if pair.fn == "max" else "<"
    x = f"v{pos.args[0]}"
    walk = [
        *(lines.compute(m) for m in loop),
        f"take = {mask} & (({x} {better} bv) | (({x} != {x}) & (bv == bv)))",
        f"bv = tl.where(take, {x}, bv)",
        f"bi = tl.where(take, {index}, bi)",
    ]
    low = "(2147483647 - bi)" if pair.fn == "max" else "bi"
    nan = "2147483647" if pair.fn == "max" else "-2147483648"
    key = [
        "key = tl.where(bv == 0.0, 0.0, bv).to(tl.float32).to(tl.int32, bitcast=True)",
        "key = tl.where(key < 0, key ^ 0x7FFFFFFF, key)",
        f"key = tl.where(bv != bv, {nan}, key)",
        f"key = (key.to(tl.int64) << 32) | {low}.to(tl.int64)",
    ]
    lines.names.helpers.add(T_ARG_DONE[pair.fn])
    start = "float('-inf')" if pair.fn == "max" else "float('inf')"
    return Step(
        "arg", "\n".join(walk), stat.id, start, finish=T_ARG_DONE[pair.fn], after="\n".join(key)
    )
