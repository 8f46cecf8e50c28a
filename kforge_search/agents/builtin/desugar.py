"""Composite ops as statistics plus elementwise nodes: softmax, logsumexp, mean, var, norms.

Each follows torch's definition (two-pass variance, biased for the norms), so the kernels
compute the same thing in the same order of magnitude of error.
"""

from __future__ import annotations

from typing import Any

from kforge_search.agents.builtin.convert import Converter, Leaf, T
from kforge_search.agents.builtin.dims import is_col, is_seg
from kforge_search.agents.builtin.ir import Scalar, Size, UnsupportedError, Update


def mean(cv: Converter, x: T, dim: int, keepdim: bool) -> T:
    total = cv.stat("sum", x, dim, keepdim)
    if total is x:
        return x
    return cv.ew("div", total, cv.size(x, dim))


def var(cv: Converter, x: T, dim: int, keepdim: bool, correction: float) -> T:
    if x.dims[dim % len(x.dims)] == 1:
        raise UnsupportedError("var over a size-1 dim")
    centered = cv.ew("sub", x, mean(cv, x, dim, True))
    total = cv.stat("sum", cv.ew("square", centered), dim, keepdim)
    count = cv.size(x, dim)
    if correction:
        count = Size(count.name, int(correction))
    return cv.ew("div", total, count)


def softmax(cv: Converter, x: T, dim: int, log: bool = False) -> T:
    # over a size-1 dim the statistics are the identity: exp(x - x) / exp(x - x), which is
    # 1 (log_softmax: 0) as in torch, and NaN where x is not finite, as in torch
    top = cv.stat("max", x, dim, True)
    shifted = cv.ew("sub", x, top)
    exp = cv.ew("exp", shifted)
    total = cv.stat("sum", exp, dim, True)
    if log:
        return cv.ew("sub", shifted, cv.ew("log", total))
    return cv.ew("div", exp, total)


def logsumexp(cv: Converter, x: T, dim: int, keepdim: bool) -> T:
    if x.dims[dim % len(x.dims)] == 1:
        return x  # log(exp(x)) over one element is x exactly (x + log(1))
    top = cv.stat("max", x, dim, True)
    total = cv.stat("sum", cv.ew("exp", cv.ew("sub", x, top)), dim, keepdim)
    top_out = top if keepdim else cv.stat("max", x, dim, False)
    return cv.ew("add", top_out, cv.ew("log", total))


def l2_normalize(cv: Converter, x: T, dim: int, eps: Scalar) -> T:
    norm = cv.ew("sqrt", cv.stat("sum", cv.ew("square", x), dim, True))
    return cv.ew("div", x, cv.ew("maximum", norm, eps))


def _normalize(cv: Converter, x: T, dim: int, eps: Scalar) -> T:
    centered = cv.ew("sub", x, mean(cv, x, dim, True))
    variance = cv.ew("div", cv.stat("sum", cv.ew("square", centered), dim, True), cv.size(x, dim))
    return cv.ew("mul", centered, cv.ew("rsqrt", cv.ew("add", variance, eps)))


def _affine(cv: Converter, y: T, weight: Leaf | None, bias: Leaf | None) -> T:
    if weight is not None:
        y = cv.ew("mul", y, weight)
    if bias is not None:
        y = cv.ew("add", y, bias)
    return y


def layer_norm(
    cv: Converter, x: T, shape: tuple[int, ...], w: Leaf | None, b: Leaf | None, eps: Scalar
) -> T:
    if len(shape) > 1 and tuple(x.shape[-len(shape) :]) == tuple(shape):
        dims = tuple(range(-len(shape), 0))  # several trailing dims: the columns together
        if {x.dims[d] for d in dims if x.dims[d] != 1} != {t for t in x.dims if is_col(t)}:
            raise UnsupportedError("layer_norm", f"over {shape}: not the columns {x.dims}")
        return _affine(cv, _normalize_over(cv, x, dims, eps), w, b)
    if len(shape) != 1 or x.dims[-1] not in ("C", "S") or x.shape[-1] != shape[0]:
        raise UnsupportedError("layer_norm", f"over {shape}: only over the last dim")
    return _affine(cv, _normalize(cv, x, -1, eps), w, b)


def _normalize_over(cv: Converter, x: T, dims: tuple[int, ...], eps: Scalar) -> T:
    """(x - mean) / sqrt(biased variance + eps) over several dims (two passes, as torch)."""
    from kforge_search.agents.builtin import losses

    centered = cv.ew("sub", x, losses.mean(cv, x, dims, True))
    variance = losses.mean(cv, cv.ew("square", centered), dims, True)
    return cv.ew("mul", centered, cv.ew("rsqrt", cv.ew("add", variance, eps)))


def group_norm(
    cv: Converter, x: T, groups: Scalar, w: Leaf | None, b: Leaf | None, eps: Scalar
) -> T:
    """GroupNorm of [N, C, *pixels] (or [N, C]) whose columns are all but the batch (the
    features after a GEMM; an input's channels and pixels, tokens C, C1, ...): statistics
    per row segment of C / G channels (contiguous columns), the affine weight and bias per
    channel, broadcast along the pixels (a column vector over C, Load.inner)."""
    n_cols = len(x.dims) - 1
    cols = ("C", *(f"C{i}" for i in range(1, n_cols)))
    if x.dims != ("L0", *cols) or cv.lead != ("L0",):
        raise UnsupportedError("group_norm", f"on dims {x.dims}: needs [batch, C, *pixels]")
    cv.set_groups(groups)
    g, channels = int(groups.value), x.shape[1]
    if g < 1 or channels % g:
        raise UnsupportedError("group_norm", f"{channels} channels in {g} groups")
    # The segments' real shape [N, G, C/G * pixels]: the roofline's work follows it.
    grouped_shape = (x.shape[0], g, _numel(x.shape[1:]) // g)
    grouped = T(x.id, ("L0", "G", "S"), grouped_shape, x.space, x.stage)
    y = _normalize(cv, grouped, -1, eps)
    y = T(y.id, x.dims, x.shape, y.space, y.stage)
    per = (channels,) + (1,) * (n_cols - 1)  # a per-channel vector against [C, *pixels]

    def channel(v: Any) -> Any:
        return Leaf(v.expr, per) if isinstance(v, Leaf) else v

    return _affine(cv, y, channel(w), channel(b))


def instance_norm(cv: Converter, x: T, w: Leaf | None, b: Leaf | None, eps: Scalar) -> T:
    """InstanceNorm1d/2d/3d on [N, C, *spatial]: statistics per (sample, channel) over the
    spatial dims. The GEMM's columns viewed as channels of pixels make them row segments; a
    single channel (a row lifted to [N, 1, 1, F]) makes them whole rows."""
    spatial_cols = x.dims[2:] and all(is_col(t) or t == 1 for t in x.dims[2:])
    if x.dims[:2] == ("L0", "L1") and cv.lead == ("L0", "L1") and spatial_cols:
        # an input whose (sample, channel) pairs are the rows: statistics per row
        if w is not None or b is not None:
            raise UnsupportedError("instance_norm", "affine weights of an input's channels")
        return _normalize_over(cv, x, tuple(range(2, len(x.dims))), eps)
    if len(cv.lead) != 1 or len(x.dims) < 3 or x.dims[0] != "L0":
        raise UnsupportedError("instance_norm", f"on dims {x.dims}: needs [batch, C, ...]")
    channel, spatial = x.dims[1], [t for t in x.dims[2:] if t != 1]
    if channel == "G" and spatial and all(is_seg(t) for t in spatial):
        size = x.shape[1]
        flat = T(x.id, ("L0", "G", "S"), (x.shape[0], size, _numel(x.shape[2:])), x.space, x.stage)
    elif channel == 1 and spatial == ["C"]:
        size = 1
        flat = T(x.id, ("L0", "C"), (x.shape[0], _numel(x.shape[2:])), x.space, x.stage)
    else:
        raise UnsupportedError("instance_norm", f"on dims {x.dims}: channels of the columns")
    y = _normalize(cv, flat, -1, eps)
    shape = (size, 1)  # the affine vectors broadcast along each channel
    y = _affine(
        cv,
        y,
        Leaf(w.expr, shape) if w is not None else None,
        Leaf(b.expr, shape) if b is not None else None,
    )
    return T(y.id, x.dims, x.shape, y.space, y.stage)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def batch_norm(
    cv: Converter,
    x: T,
    stats: tuple[Leaf, Leaf] | None,
    w: Leaf | None,
    b: Leaf | None,
    eps: Scalar,
    update: tuple[Leaf, Leaf, Scalar, str] | None = None,
) -> T:
    """Batch statistics when `stats` is None (training), else running (mean, var). In
    training, `update` (running mean, running var, momentum, counter) are updated as torch
    does: running = (1 - momentum) * running + momentum * batch value, with the unbiased
    batch variance, and the counter incremented."""
    if x.dims != ("L0", "C"):
        raise UnsupportedError("batch_norm", f"on dims {x.dims}: needs [batch, features]")
    if stats is None:
        batch_mean = mean(cv, x, 0, True)
        centered = cv.ew("sub", x, batch_mean)
        squares = cv.stat("sum", cv.ew("square", centered), 0, True)
        variance = cv.ew("div", squares, Size("rows"))
        y = cv.ew("mul", centered, cv.ew("rsqrt", cv.ew("add", variance, eps)))
        if update is not None:
            unbiased = cv.ew("div", squares, Size("rows", 1))
            _running_update(cv, update, batch_mean, unbiased, cv.align)
        return _affine(cv, y, w, b)
    running_mean, running_var = stats
    centered = cv.ew("sub", x, running_mean)
    inv = cv.ew("rsqrt", cv.ew("add", cv.align(running_var, x), eps))
    return _affine(cv, cv.ew("mul", centered, inv), w, b)


def _running_update(
    cv: Converter,
    update: tuple[Leaf, Leaf, Scalar, str],
    batch_mean: T,
    unbiased: T,
    aligned: Any,
) -> None:
    """Training BatchNorm's buffers, as torch updates them: running = (1 - momentum) *
    running + momentum * batch value (the unbiased variance), and the counter + 1.
    `aligned(leaf, batch)`: a running buffer as a value of the batch statistic's space."""
    running_mean, running_var, momentum, counter = update
    keep = Scalar(1.0 - momentum.value, f"1.0 - ({momentum.source})" if momentum.source else "")
    for leaf, batch in ((running_mean, batch_mean), (running_var, unbiased)):
        old = cv.ew("mul", aligned(leaf, batch), keep)
        new = cv.ew("add", cv.ew("mul", batch, momentum), old)
        cv.updates.append(Update(leaf.expr, new.id))
    cv.updates.append(Update(counter))


def swap_lead(leaf: Leaf) -> Leaf:
    """An input of rank 3 or more viewed with its first two dims swapped ([N, C, *pixels]
    as [C, N, *pixels]): a stage anchored by it reads the input in place (Gemm.swap_of)."""
    if leaf.transposed or leaf.swap_of or len(leaf.shape) < 3:
        raise UnsupportedError("a swap of the leading dims", f"of {leaf.expr} {leaf.shape}")
    shape = (leaf.shape[1], leaf.shape[0], *leaf.shape[2:])
    return Leaf(f"{leaf.expr}.transpose(0, 1)", shape, swap_of=leaf.expr)


def batch_norm_channels(
    cv: Converter,
    x: Any,
    stats: tuple[Leaf, Leaf] | None,
    w: Leaf | None,
    b: Leaf | None,
    eps: Scalar,
    update: tuple[Leaf, Leaf, Scalar, str] | None = None,
) -> T:
    """BatchNorm2d/3d of a program's input [N, C, *pixels]: statistics per channel over
    the batch and the pixels. The input is read channel-major (its view [C, N, *pixels],
    read in place: Gemm.swap_of): each channel is a row, its statistics row statistics; the
    output is that space viewed back to [N, C, *pixels]. Training: batch statistics
    (biased), the running statistics updated as torch does (unbiased variance); eval:
    running ones."""
    from kforge_search.agents.builtin import losses

    if not isinstance(x, Leaf) or x.transposed or len(x.shape) < 3 or cv.stage >= 0:
        raise UnsupportedError("batch_norm over channels", "only of a program's input")
    c = x.shape[1]
    tile = cv.anchor(swap_lead(x), first=1)
    dims = tuple(range(1, len(x.shape)))
    per = (c,) + (1,) * (len(x.shape) - 1)  # a per-channel vector against [C, N, *pixels]

    def channel(leaf: Leaf | None) -> Leaf | None:
        return None if leaf is None else Leaf(leaf.expr, per)

    if stats is None:
        batch_mean = losses.mean(cv, tile, dims, True)
        centered = cv.ew("sub", tile, batch_mean)
        squares = cv.reduce("sum", cv.ew("square", centered), dims, True)
        variance = cv.ew("div", squares, Size("cols"))
        y = cv.ew("mul", centered, cv.ew("rsqrt", cv.ew("add", variance, eps)))
        if update is not None:
            unbiased = cv.ew("div", squares, Size("cols", 1))
            _running_update(cv, update, batch_mean, unbiased, lambda leaf, _: channel(leaf))
    else:
        running_mean, running_var = stats
        centered = cv.ew("sub", tile, channel(running_mean))
        y = cv.ew("mul", centered, cv.ew("rsqrt", cv.ew("add", channel(running_var), eps)))
    y = _affine(cv, y, channel(w), channel(b))
    dims_out = (y.dims[1], y.dims[0], *y.dims[2:])  # [C, N, ...] viewed back as [N, C, ...]
    return T(y.id, dims_out, x.shape, y.space, y.stage)
