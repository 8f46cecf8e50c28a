"""Exact rewrites of the IR before lowering: each is exact in real arithmetic and more
accurate in floating point, and is named in the draft's note.

A GEMM summed over its outputs: sum_n (x W^T + b)[r, n] = x . (sum_n W[n, :]) + sum_n b[n].
The sum over N of the weight (and of any per-column vector on the way) is made once, in a
kernel accumulating in double precision (`_kf_sum_n`, cached until the parameter changes),
and the GEMM becomes a GEMV with one output column: N times less work, and no sum of N
rounded GEMM outputs (whose errors, for all-positive inputs such as torch.rand's, add up
rather than cancel).
"""

from __future__ import annotations

import dataclasses

from kforge_search.agents.builtin.ir import (
    Ew,
    Gemm,
    Graph,
    Kind,
    Load,
    Node,
    Scalar,
    Size,
    Stat,
    Work,
)

GEMM_SUM = "gemm_sum_as_gemv"
NOTES = {
    GEMM_SUM: "the GEMM summed over its outputs is computed as x @ W.sum(0) (a GEMV on the "
    "weight summed over its outputs once, in double precision) plus the summed bias: exact "
    "in real arithmetic, N times less work, and no sum of N rounded outputs",
}


def derived_sum(expr: str, dim: int, key: str) -> str:
    """A forward expression: `expr` summed over `dim` (kept), made once and cached."""
    return f'self._kf_derived("{key}", {expr}, lambda w: _kf_sum_n(w, {dim}))'


def _linear_chain(graph: Graph, stat: Stat, users: dict[int, list[int]]) -> list[int] | None:
    """The Ew nodes from the GEMM to the sum (GEMM first), when each is affine in the one
    before with per-column or scalar operands and used only by the next; else None."""
    chain: list[int] = []
    node: Node = graph.node(stat.x)
    while isinstance(node, Ew):
        if len(users[node.id]) != 1:
            return None
        ins = [a for a in node.args if isinstance(a, int)]
        inner = [a for a in ins if graph.node(a).kind is Kind.MAT]
        if len(inner) != 1:
            return None
        other = [a for a in node.args if a != inner[0]]
        if node.fn in ("add", "sub"):
            ok = all(isinstance(a, int) and _col_load(graph, a) for a in other)
        elif node.fn == "mul" or (node.fn == "div" and node.args[0] == inner[0]):
            ok = all(isinstance(a, Scalar) or _one_load(graph, a) for a in other)
        else:
            ok = node.fn == "neg"
        if not ok:
            return None
        chain.append(node.id)
        node = graph.node(inner[0])
    if not isinstance(node, Gemm) or len(users[node.id]) != 1 or node.batched:
        return None
    if not node.b.startswith("self."):
        return None
    return [node.id, *reversed(chain)]


def _col_load(graph: Graph, node_id: int) -> bool:
    node = graph.node(node_id)
    return isinstance(node, Load) and node.kind is Kind.COL and node.tensor.startswith("self.")


def _one_load(graph: Graph, arg: object) -> bool:
    return isinstance(arg, int) and graph.node(arg).kind is Kind.ONE


def _stage_nodes(graph: Graph, gemm_id: int) -> set[int]:
    """The GEMM and every node computed from it before the next GEMM reads anything."""
    found = {gemm_id}
    for node in graph.nodes:
        if not isinstance(node, Gemm) and any(d in found for d in graph.deps(node)):
            found.add(node.id)
    return found


def gemm_sum(graph: Graph) -> Graph:
    """Every sum over a GEMM's outputs (through affine per-column and scalar steps) as a
    GEMV on the weight's sum; sizes of the GEMM's columns read from the weight."""
    users = graph.users()
    nodes = list(graph.nodes)
    gemms = [n.id for n in graph.nodes if isinstance(n, Gemm)]
    work = list(graph.work.gemms)
    tail_ops, min_bytes = graph.work.tail_ops, graph.work.min_bytes
    done = False
    for stat in [n for n in graph.nodes if isinstance(n, Stat)]:
        if stat.fn != "sum" or stat.axis != "row" or stat.groups is not None or stat.space:
            continue
        chain = _linear_chain(graph, stat, users)
        if chain is None:
            continue
        gemm = graph.node(chain[0])
        assert isinstance(gemm, Gemm)
        after = _stage_nodes(graph, gemm.id) - set(chain)
        if any(graph.node(n).kind in (Kind.MAT, Kind.COL) for n in after):
            continue  # the GEMM's columns are still needed (e.g. a residual on the row sum)
        dim = 0 if gemm.b_layout == "nk" else 1
        key = f"_kf_sum{gemm.id}"
        nodes[gemm.id] = dataclasses.replace(gemm, b=derived_sum(gemm.b, dim, key))
        for n in chain[1:]:
            for a in nodes[n].args:  # type: ignore[union-attr]
                if isinstance(a, int) and _col_load(graph, a):
                    load = graph.node(a)
                    assert isinstance(load, Load)
                    flat = f"{load.tensor}.reshape(1, -1)"
                    nodes[a] = dataclasses.replace(load, tensor=derived_sum(flat, 1, f"{key}_{a}"))
        cols = Scalar(float(work[gemms.index(gemm.id)][2]), f"{gemm.b}.shape[{dim}]")
        for n in _stage_nodes(graph, gemm.id):
            node = nodes[n]
            if isinstance(node, Ew) and any(a == Size("cols") for a in node.args):
                args = tuple(cols if a == Size("cols") else a for a in node.args)
                nodes[n] = dataclasses.replace(node, args=args)
            elif isinstance(node, Ew) and any(isinstance(a, Size) for a in node.args):
                return graph  # another size of the columns: leave the GEMM as it is
        b, m, n, k = work[gemms.index(gemm.id)]
        work[gemms.index(gemm.id)] = (b, m, 1, k)
        # the roofline's work: the tail runs on one column, the weight's sum is read
        tail_ops = tail_ops / n
        min_bytes -= 4.0 * (n - 1) * k
        done = True
    if not done:
        return graph
    new_work = Work(tuple(work), tail_ops, min_bytes)
    return dataclasses.replace(
        graph, nodes=tuple(nodes), work=new_work, rewrites=(*graph.rewrites, GEMM_SUM)
    )


def rewrite(graph: Graph) -> Graph:
    # float16 / bfloat16: torch rounds every GEMM output before the sum, and the GEMV would
    # read the weight's float32 sum against low-precision inputs: the GEMM stays
    return graph if graph.low_precision else gemm_sum(graph)
