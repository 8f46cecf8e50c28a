"""Norms and losses as statistics plus elementwise nodes, following torch's definitions.

A loss's `reduction` ("mean", "sum", "none"; kl_div's "batchmean") is a statistic over all
dims (a row statistic, then one over the rows), divided by the element or batch count.
"""

from __future__ import annotations

from typing import Any

from kforge_search.agents.builtin.convert import Converter, T, scalar
from kforge_search.agents.builtin.dims import is_col
from kforge_search.agents.builtin.ir import Size, UnsupportedError


def mean(cv: Converter, x: T, dims: tuple[int, ...] | None, keepdim: bool) -> T:
    """The mean over one dim, several or all: the sum divided by the count of each."""
    total = cv.reduce("sum", x, dims, keepdim)
    if total is x:
        return x
    rank = len(x.dims)
    picked = {d % rank for d in dims} if dims is not None else set(range(rank))
    tokens = {x.dims[d] for d in picked if x.dims[d] != 1}
    leads = [t for t in x.dims if str(t).startswith("L")]
    out = total
    if any(is_col(t) for t in tokens):
        out = cv.ew("div", out, Size("cols"))  # every column token: NC is their product
    reduced = [t for t in leads if t in tokens]
    if reduced and reduced == leads:
        out = cv.ew("div", out, Size("rows"))
    elif reduced == leads[-1:] and len(leads) > 1:
        out = cv.ew("div", out, Size("brows"))  # the last leading dim: one batch's rows
    elif reduced:
        raise UnsupportedError("mean", f"over leading dims {reduced} of {x.dims}")
    return out


def reduce_loss(cv: Converter, pointwise: T, reduction: str, what: str) -> T:
    if reduction == "none":
        return pointwise
    if reduction == "sum":
        return cv.reduce("sum", pointwise, None, False)
    if reduction == "mean":
        return mean(cv, pointwise, None, False)
    raise UnsupportedError(what, f"reduction={reduction!r}")


def norm(cv: Converter, x: Any, p: Any, dims: tuple[int, ...] | None, keepdim: bool) -> T:
    """torch.norm / linalg.vector_norm: p 2 (or 'fro'), 1 or inf."""
    if p in (None, "fro", 2, 2.0):
        return cv.ew("sqrt", cv.reduce("sum", cv.ew("square", x), dims, keepdim))
    if p in (1, 1.0):
        return cv.reduce("sum", cv.ew("abs", x), dims, keepdim)
    if p == float("inf"):
        return cv.reduce("max", cv.ew("abs", x), dims, keepdim)
    raise UnsupportedError("norm", f"p={p!r}: only 1, 2, 'fro' and inf")


def _reduction(kw: dict[str, Any], default: str = "mean") -> str:
    if kw.get("size_average") is not None or kw.get("reduce") is not None:
        raise UnsupportedError("loss", "the deprecated size_average / reduce arguments")
    return str(kw.get("reduction", default))


def mse_loss(cv: Converter, x: Any, y: Any, kw: dict[str, Any]) -> T:
    return reduce_loss(cv, cv.ew("square", cv.ew("sub", x, y)), _reduction(kw), "mse_loss")


def l1_loss(cv: Converter, x: Any, y: Any, kw: dict[str, Any]) -> T:
    return reduce_loss(cv, cv.ew("abs", cv.ew("sub", x, y)), _reduction(kw), "l1_loss")


def smooth_l1_loss(cv: Converter, x: Any, y: Any, beta: Any, kw: dict[str, Any]) -> T:
    """torch's smooth L1 (Huber / beta): 0.5 d^2 / beta below beta, |d| - 0.5 beta above;
    beta 0 is the L1 loss."""
    if float(beta) == 0.0:
        return l1_loss(cv, x, y, kw)
    d = cv.ew("sub", x, y)
    return reduce_loss(cv, cv.ew("smooth_l1", d, scalar(beta)), _reduction(kw), "smooth_l1_loss")


def huber_loss(cv: Converter, x: Any, y: Any, delta: Any, kw: dict[str, Any]) -> T:
    """delta * smooth_l1 with beta = delta."""
    d = cv.ew("sub", x, y)
    point = cv.ew("mul", cv.ew("smooth_l1", d, scalar(delta)), scalar(delta))
    return reduce_loss(cv, point, _reduction(kw), "huber_loss")


def kl_div(cv: Converter, x: Any, y: Any, kw: dict[str, Any]) -> T:
    """target * (log(target) - input) (log_target: exp(t) * (t - input)), reduced; batchmean
    divides the sum by the batch size (dim 0)."""
    if kw.get("log_target", False):
        point = cv.ew("mul", cv.ew("exp", y), cv.ew("sub", y, x))
    else:
        point = cv.ew("sub", cv.ew("xlogx", y), cv.ew("mul", y, x))
    reduction = _reduction(kw)
    if reduction != "batchmean":
        return reduce_loss(cv, point, reduction, "kl_div")
    total = cv.reduce("sum", point, None, False)
    batch = Size("rows") if point.dims and str(point.dims[0]) == "L0" else None
    if batch is None or len([t for t in point.dims if str(t).startswith("L")]) != 1:
        raise UnsupportedError("kl_div", "batchmean of a value whose dim 0 is not the batch")
    return cv.ew("div", total, batch)


def pairwise_distance(cv: Converter, x: Any, y: Any, p: Any, eps: Any, keepdim: bool) -> T:
    """||x - y + eps||_p over the last dim."""
    diff = cv.ew("add", cv.ew("sub", x, y), scalar(eps))
    return norm(cv, diff, p, (-1,), keepdim)


def triplet_margin_loss(
    cv: Converter, a: Any, pos: Any, neg: Any, margin: Any, p: Any, eps: Any, swap: bool,
    reduction: str,
) -> T:  # fmt: skip
    if swap:
        raise UnsupportedError("triplet_margin_loss", "swap=True")
    d_pos = pairwise_distance(cv, a, pos, p, eps, False)
    d_neg = pairwise_distance(cv, a, neg, p, eps, False)
    point = cv.ew("maximum", cv.ew("add", cv.ew("sub", d_pos, d_neg), scalar(margin)), 0.0)
    return reduce_loss(cv, point, reduction, "triplet_margin_loss")


def cosine_similarity(cv: Converter, x: Any, y: Any, dim: int, eps: Any) -> T:
    """x . y / max(||x|| ||y||, eps) over `dim` (torch clamps the product of the norms)."""
    dot = cv.reduce("sum", cv.ew("mul", x, y), (dim,), False)
    nx = cv.reduce("sum", cv.ew("square", x), (dim,), False)
    ny = cv.reduce("sum", cv.ew("square", y), (dim,), False)
    denom = cv.ew("sqrt", cv.ew("maximum", cv.ew("mul", nx, ny), scalar(float(eps) ** 2)))
    return cv.ew("div", dot, denom)


def cross_entropy(cv: Converter, x: Any, target: Any, kw: dict[str, Any]) -> T:
    """Over the last dim of [B, C] logits: logsumexp(x) - x[t] per row for class indices
    (targets equal to ignore_index are left out of the sum and of the mean's count), or
    -sum(t * log_softmax(x)) for class probabilities."""
    from kforge_search.agents.builtin import desugar
    from kforge_search.agents.builtin.convert import Leaf

    if kw.get("weight") is not None or float(kw.get("label_smoothing", 0.0) or 0.0) != 0.0:
        raise UnsupportedError("cross_entropy", "class weights or label smoothing")
    if not isinstance(x, T) or len(x.shape) != 2:
        raise UnsupportedError("cross_entropy", "only [batch, classes] logits")
    reduction = _reduction(kw)
    lse = desugar.logsumexp(cv, x, -1, True)
    if isinstance(target, Leaf) and target.shape == x.shape:  # class probabilities
        logp = cv.ew("sub", x, lse)
        point = cv.ew("neg", cv.reduce("sum", cv.ew("mul", target, logp), (-1,), False))
        return reduce_loss(cv, point, reduction, "cross_entropy")
    if not isinstance(target, Leaf) or target.shape != x.shape[:1]:
        raise UnsupportedError("cross_entropy", "targets: class indices [batch] of an input")
    column = Leaf(target.expr, (*target.shape, 1))  # one class per row
    picked = cv.reduce("sum", cv.ew("pick_col", x, column, scalar(0.0)), (-1,), True)
    ignore = scalar(float(kw.get("ignore_index", -100)))
    valid = cv.ew("not_equal", column, ignore)
    point = cv.ew("mul", cv.ew("sub", lse, picked), valid)
    if reduction == "none":
        return cv.reduce("sum", point, (-1,), False)
    total = cv.reduce("sum", point, None, False)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise UnsupportedError("cross_entropy", f"reduction={reduction!r}")
    return cv.ew("div", total, cv.reduce("sum", valid, None, False))
