"""Scaled dot-product attention as the IR's own pieces: two batched GEMMs around a softmax
over each row of scores (softmax(Q K^T * scale) V). The first GEMM's tile spans a row of
scores where the sequence is short enough, and the softmax then runs in its epilogue.

Q, K, V of shape [..., S, D] are read as batches of [S, D] matrices (a view: the batch dims
flattened); the output is viewed back to Q's leading dims.
"""

from __future__ import annotations

import math
from typing import Any

from kforge_search.agents.builtin import desugar
from kforge_search.agents.builtin.convert import Converter, Leaf, T, scalar
from kforge_search.agents.builtin.ir import UnsupportedError


def _batched(leaf: Leaf) -> Leaf:
    """[..., S, D] as [B, S, D]: the leading dims flattened (a view of a contiguous input)."""
    if len(leaf.shape) < 3:
        raise UnsupportedError("scaled_dot_product_attention", f"inputs of shape {leaf.shape}")
    e = leaf.expr
    batch = math.prod(leaf.shape[:-2])
    expr = e if len(leaf.shape) == 3 else f"{e}.reshape(-1, {e}.shape[-2], {e}.shape[-1])"
    return Leaf(expr, (batch, *leaf.shape[-2:]))


def sdpa(cv: Converter, q: Any, k: Any, v: Any, kw: dict[str, Any]) -> T:
    for name in ("attn_mask",):
        if kw.get(name) is not None:
            raise UnsupportedError("scaled_dot_product_attention", f"with {name}")
    if float(kw.get("dropout_p", 0.0) or 0.0) != 0.0 or kw.get("is_causal", False):
        raise UnsupportedError("scaled_dot_product_attention", "dropout or is_causal")
    if kw.get("enable_gqa", False):
        raise UnsupportedError("scaled_dot_product_attention", "enable_gqa")
    if not all(isinstance(x, Leaf) and not x.transposed for x in (q, k, v)):
        raise UnsupportedError("scaled_dot_product_attention", "of computed values")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or q.shape[-1] != k.shape[-1]:
        raise UnsupportedError("scaled_dot_product_attention", f"{q.shape}, {k.shape}, {v.shape}")
    scale = kw.get("scale")
    factor = scalar(float(scale) if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if scale is None:  # torch's default, read from the query's last dim at run time
        factor = type(factor)(factor.value, f"1.0 / ({q.expr}.shape[-1] ** 0.5)")
    bq, bk, bv = _batched(q), _batched(k), _batched(v)
    scores = cv.gemm(bq, bk, "nk", batched=True)  # K stored [S_k, D]: Q K^T
    probs = desugar.softmax(cv, cv.ew("mul", scores, factor), -1)
    out = cv.gemm(probs, bv, "kn", batched=True)
    cv.out_shape = f"(*{q.expr}.shape[:-1], {v.expr}.shape[-1])"
    cv.out_of_shape = out.id
    return out
