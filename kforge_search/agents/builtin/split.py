"""Which dims of a program's input become the columns of a stage anchored by nothing.

The kernels walk a [rows, cols] space. For a program without a GEMM the space comes from its
largest input: by default its last dim is the columns and the dims before it the rows. A
reduction over several trailing dims (LayerNorm over (C, H, W), InstanceNorm over (H, W);
GroupNorm of [N, C, *pixels] over all but the batch, per row segment of C / G channels)
wants those dims as the columns, so that it is a statistic per row; a reduction over one
middle dim (a sum over dim 1 of [B, D1, D2]) wants the dims after it as the columns and the
reduced dim last among the rows, so that it is a statistic per column of each batch. The
first such reduction in the program decides.
"""

from __future__ import annotations

from typing import Any

REDUCING = {
    "sum", "mean", "amax", "amin", "max", "min", "norm", "vector_norm", "var", "std",
    "logsumexp", "argmax", "argmin", "prod",
}  # fmt: skip


def _shape(value: Any) -> tuple[int, ...] | None:
    meta = getattr(value, "meta", {}).get("tensor_meta") if hasattr(value, "meta") else None
    return tuple(meta.shape) if meta is not None else None


def _reduced(node: Any, gm: Any) -> tuple[int, tuple[int, ...]] | None:
    """(input rank, the dims it reduces) of a reducing node, or None."""
    if not node.args:
        return None
    shape = _shape(node.args[0])
    if shape is None:
        return None
    rank = len(shape)
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        name = type(module).__name__
        if name == "LayerNorm":
            n = len(tuple(module.normalized_shape))
            return rank, tuple(range(rank - n, rank))
        if name.startswith("InstanceNorm"):
            return rank, tuple(range(2, rank))
        if name == "GroupNorm":
            return rank, tuple(range(1, rank))  # (channels, *pixels): G segments of them
        return None
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if name == "group_norm":
        return rank, tuple(range(1, rank))
    if name == "layer_norm":
        shape_arg = node.args[1] if len(node.args) > 1 else node.kwargs.get("normalized_shape")
        n = len(tuple(shape_arg)) if isinstance(shape_arg, list | tuple) else 1
        return rank, tuple(range(rank - n, rank))
    if name not in REDUCING:
        return None
    dim = node.kwargs.get("dim")
    if dim is None and len(node.args) > 1 and name not in ("norm",):
        dim = node.args[1]
    if dim is None and name == "norm":
        dim = node.args[2] if len(node.args) > 2 else None
    if dim is None and _whole(node, name):
        return rank, tuple(range(rank))  # every element: one statistic
    if dim is None or not isinstance(dim, int | list | tuple):
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not all(isinstance(d, int) for d in dims):
        return None
    return rank, tuple(sorted({d % rank for d in dims}))


def _whole(node: Any, name: str) -> bool:
    """Whether a reducing call without a dim reduces every element (`torch.norm(x, p='fro')`,
    `x.sum()`), not `torch.max(a, b)` elementwise."""
    rest = node.args[2:] if name == "norm" else node.args[1:]
    return name not in ("argmax", "argmin") and not any(hasattr(a, "op") for a in rest)


def columns_from(gm: Any, shape: tuple[int, ...]) -> int:
    """The first dim of the columns for an input of this shape (rank - 1: the last dim)."""
    rank = len(shape)
    for node in gm.graph.nodes:
        found = _reduced(node, gm)
        if found is None or found[0] != rank:
            continue
        dims = found[1]
        if dims == tuple(range(rank)) and rank > 2:
            return _whole_rows(shape)
        if dims == tuple(range(dims[0], rank)) and dims[0] > 0:
            return dims[0]  # trailing dims: a statistic per row
        if len(dims) == 1 and 0 < dims[0] < rank - 1:
            return dims[0] + 1  # one middle dim: a statistic per column of each batch
    return rank - 1


WHOLE_ROWS = 2048  # a reduction of every element: at most this many rows


def _whole_rows(shape: tuple[int, ...]) -> int:
    """The columns of a reduction over every element: the most leading dims that make at
    most WHOLE_ROWS rows (at least the first), so that each row's statistic is a long row pass
    (in parts) and the statistic over the rows' results a short one. Rows of the last dim
    alone (37_FrobeniusNorm, [112, 64, 512, 512]: 3.7 M rows of 512) left that second pass,
    one program, walking 3.7 M results: 33 ms where torch.compile took 5.2 (H200)."""
    first, rows = 1, shape[0]
    while first < len(shape) - 1 and rows * shape[first] <= WHOLE_ROWS:
        rows *= shape[first]
        first += 1
    return first
