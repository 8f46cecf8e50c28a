"""The tables from fx targets to handlers: functions and tensor methods by name, modules by
class name. A target missing here is `unsupported: <name>`."""

from __future__ import annotations

import functools
import math
from typing import Any

from kforge_search.agents.builtin import attention, desugar, losses, scans
from kforge_search.agents.builtin import handlers as h
from kforge_search.agents.builtin.convert import Converter, Indexed, Leaf, ShapeOf, T, scalar
from kforge_search.agents.builtin.ir import Scalar, UnsupportedError, Window
from kforge_search.agents.builtin.trace import source_of

A = tuple[Any, ...]
K = dict[str, Any]


def _reduce(cv: Converter, fn: str, args: A, kw: K, indexed: bool = False) -> Any:
    x = h._tensor(args[0], fn)
    dims = h.dims(h._arg(args, kw, 1, "dim", None))
    keepdim = bool(h._arg(args, kw, 2, "keepdim", False))
    if kw.get("dtype") is not None:
        raise UnsupportedError(f"{fn} with a dtype")
    if fn == "mean":
        return losses.mean(cv, x, dims, keepdim)
    if fn == "logsumexp":
        return desugar.logsumexp(cv, x, h._dim(dims), keepdim)
    out = cv.reduce(fn, x, dims, keepdim)
    return Indexed(out) if indexed else out


def _arg(cv: Converter, fn: str, a: A, k: K) -> T:
    dim = h._arg(a, k, 1, "dim", None)
    if dim is None:
        raise UnsupportedError(fn, "over all elements (a flat index)")
    return cv.arg(fn, h._tensor(a[0], fn), int(dim), bool(h._arg(a, k, 2, "keepdim", False)))


def _norm(cv: Converter, a: A, k: K) -> T:
    p = h._arg(a, k, 1, "p", "fro")
    dims = h.dims(h._arg(a, k, 2, "dim", None))
    if k.get("dtype") is not None:
        raise UnsupportedError("norm with a dtype")
    return losses.norm(
        cv, h._tensor(a[0], "norm"), p, dims, bool(h._arg(a, k, 3, "keepdim", False))
    )


def _vector_norm(cv: Converter, a: A, k: K) -> T:
    p = h._arg(a, k, 1, "ord", 2)
    dims = h.dims(h._arg(a, k, 2, "dim", None))
    return losses.norm(
        cv, h._tensor(a[0], "norm"), p, dims, bool(h._arg(a, k, 3, "keepdim", False))
    )


def _triplet(cv: Converter, a: A, k: K) -> T:
    return losses.triplet_margin_loss(
        cv, a[0], a[1], a[2], h._arg(a, k, 3, "margin", 1.0), h._arg(a, k, 4, "p", 2),
        h._arg(a, k, 5, "eps", 1e-6), bool(h._arg(a, k, 6, "swap", False)),
        str(k.get("reduction", "mean")),
    )  # fmt: skip


def _max_min(cv: Converter, fn: str, args: A, kw: K) -> Any:
    other = h._arg(args, kw, 1, "dim", None)
    if isinstance(other, T | Leaf):
        return cv.ew("maximum" if fn == "max" else "minimum", args[0], other)
    if other is None:
        raise UnsupportedError(f"{fn} over all elements")
    return _reduce(cv, fn, args, kw, indexed=True)


def _var(cv: Converter, fn: str, args: A, kw: K) -> T:
    x = h._tensor(args[0], fn)
    dim = h._dim(h._arg(args, kw, 1, "dim", None))
    unbiased = h._arg(args, kw, 2, "unbiased", True)
    correction = kw.get("correction", 1.0 if unbiased else 0.0)
    keepdim = bool(h._arg(args, kw, 3, "keepdim", False))
    out = desugar.var(cv, x, dim, keepdim, float(correction))
    return cv.ew("sqrt", out) if fn == "std" else out


def _softmax(cv: Converter, args: A, kw: K, log: bool) -> T:
    dim = h._arg(args, kw, 1, "dim", None)
    if dim is None or kw.get("dtype") is not None:
        raise UnsupportedError("softmax without an explicit dim or with a dtype")
    return desugar.softmax(cv, h._tensor(args[0], "softmax"), int(dim), log)


def _per_dim(value: Any, dims: int, what: str) -> tuple[Scalar, ...]:
    """A pooling size per spatial dim: an int for all of them, or one per dim."""
    values = list(value) if isinstance(value, list | tuple) else [value]
    if len(values) == 1:
        values *= dims
    if len(values) != dims or not all(isinstance(v, int) for v in values):
        raise UnsupportedError(f"pooling {what}", repr(value))
    return tuple(Scalar(float(v), source_of(v)) for v in values)


def _pool(
    cv: Converter,
    node: Any,
    fn: str,
    dims: int,
    x: Any,
    kernel: Any,
    stride: Any,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: Any = False,
    count_include_pad: Any = True,
    divisor_override: Any = None,
    return_indices: Any = False,
) -> T:
    """Max or average pooling: of a program's input, a stage anchored by the window
    reduction; of a GEMM's columns (1-d, kernel = stride, no padding), a `Pool` in its
    epilogue."""
    what = f"{fn}_pool{dims}d"
    if return_indices:
        raise UnsupportedError(what, "return_indices: only the pooled values are computed")
    if divisor_override is not None:
        raise UnsupportedError(what, "divisor_override")
    k = _per_dim(kernel, dims, "kernel_size")
    window = Window(
        fn,
        k,
        _per_dim(stride, dims, "stride") if stride not in (None, [], ()) else k,
        _per_dim(padding, dims, "padding"),
        _per_dim(dilation, dims, "dilation"),
        bool(ceil_mode),
        bool(count_include_pad),
    )
    out_shape = tuple(node.meta["tensor_meta"].shape)
    if isinstance(x, Leaf):
        return cv.window(x, window, out_shape)
    columns = (
        dims == 1
        and [v.value for v in window.stride] == [v.value for v in k]
        and window.padding[0].value == 0
        and window.dilation[0].value == 1
        and not window.ceil_mode
    )
    if not columns:
        why = "of a computed value: only kernel = stride, no padding, dilation or ceil_mode"
        raise UnsupportedError(what, why)
    return cv.pool(fn, h._tensor(x, "pool"), k[0], out_shape)


def _max_pool(dims: int, cv: Converter, node: Any, a: A, k: K, indices: bool = False) -> T:
    return _pool(
        cv, node, "max", dims, a[0], h._arg(a, k, 1, "kernel_size", None),
        h._arg(a, k, 2, "stride", None), h._arg(a, k, 3, "padding", 0),
        h._arg(a, k, 4, "dilation", 1), h._arg(a, k, 5, "ceil_mode", False),
        return_indices=indices or h._arg(a, k, 6, "return_indices", False),
    )  # fmt: skip


def _avg_pool(dims: int, cv: Converter, node: Any, a: A, k: K) -> T:
    return _pool(
        cv, node, "avg", dims, a[0], h._arg(a, k, 1, "kernel_size", None),
        h._arg(a, k, 2, "stride", None), h._arg(a, k, 3, "padding", 0), 1,
        h._arg(a, k, 4, "ceil_mode", False), h._arg(a, k, 5, "count_include_pad", True),
        h._arg(a, k, 6, "divisor_override", None),
    )  # fmt: skip


def _pool_module(cv: Converter, node: Any, m: Any, x: Any) -> T:
    name = type(m).__name__
    fn, dims = ("max" if name.startswith("Max") else "avg"), int(name[-2])
    if fn == "max":
        return _pool(
            cv, node, fn, dims, x, m.kernel_size, m.stride, m.padding, m.dilation,
            m.ceil_mode, return_indices=m.return_indices,
        )  # fmt: skip
    return _pool(
        cv, node, fn, dims, x, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode,
        m.count_include_pad, getattr(m, "divisor_override", None),
    )  # fmt: skip


POOLS = {f"{fn}_pool{d}d" for fn in ("max", "avg") for d in (1, 2, 3)}
POOL_MODULES = {f"{fn}Pool{d}d" for fn in ("Max", "Avg") for d in (1, 2, 3)}


def _leaf(module: Any, path: str, name: str) -> Leaf | None:
    value = getattr(module, name, None)
    return None if value is None else Leaf(f"{path}.{name}", tuple(value.shape))


def _normalize(cv: Converter, a: A, k: K) -> T:
    if float(h._arg(a, k, 1, "p", 2.0)) != 2.0:
        raise UnsupportedError("normalize", "only p=2")
    x = h._tensor(a[0], "normalize")
    eps = scalar(h._arg(a, k, 3, "eps", 1e-12))
    return desugar.l2_normalize(cv, x, int(h._arg(a, k, 2, "dim", 1)), eps)


def _to(args: A, kw: K) -> Any:
    import torch

    rest = [a for a in args[1:] if a is not None] + [v for v in kw.values() if v is not None]
    if any(r != torch.float32 for r in rest):
        raise UnsupportedError("to", f"{rest}: only float32 is supported")
    return args[0]


def _dropout(cv: Converter, x: Any, p: Any, training: Any) -> Any:
    if float(p) == 0.0 or not training:
        return x
    if not 0.0 < float(p) < 1.0:
        raise UnsupportedError("dropout", f"p={p}")
    return cv.dropout(h._tensor(x, "dropout"), scalar(p))


def _size(args: A) -> Any:
    shape = h.attribute_of(args[0], "shape")
    return h.shape_item(shape, args[1]) if len(args) > 1 else shape


FUNCS: dict[str, Any] = {
    **{n: (lambda fn: lambda cv, nd, a, k: cv.ew(fn, a[0]))(f) for n, f in h.UNARY.items()},
    **{
        n: (lambda fn: lambda cv, nd, a, k: h.binary(cv, fn, a[0], a[1], k.get("alpha", 1)))(f)
        for n, f in h.BINARY.items()
    },
    "rsub": lambda cv, nd, a, k: cv.ew("sub", a[1], a[0]),
    "gelu": lambda cv, nd, a, k: h.gelu(cv, a[0], h._arg(a, k, 1, "approximate", "none")),
    "leaky_relu": lambda cv, nd, a, k: cv.ew(
        "leaky_relu", a[0], h._arg(a, k, 1, "negative_slope", 0.01)
    ),
    "elu": lambda cv, nd, a, k: cv.ew("elu", a[0], h._arg(a, k, 1, "alpha", 1.0)),
    "softplus": lambda cv, nd, a, k: h.softplus(
        cv, a[0], h._arg(a, k, 1, "beta", 1), h._arg(a, k, 2, "threshold", 20)
    ),
    "relu6": lambda cv, nd, a, k: h.clamp(cv, a[0], 0.0, 6.0),
    "hardtanh": lambda cv, nd, a, k: h.clamp(
        cv, a[0], h._arg(a, k, 1, "min_val", -1.0), h._arg(a, k, 2, "max_val", 1.0)
    ),
    "clamp": lambda cv, nd, a, k: h.clamp(
        cv, a[0], h._arg(a, k, 1, "min", None), h._arg(a, k, 2, "max", None)
    ),
    "clamp_min": lambda cv, nd, a, k: h.clamp(cv, a[0], h._arg(a, k, 1, "min", None), None),
    "clamp_max": lambda cv, nd, a, k: h.clamp(cv, a[0], None, h._arg(a, k, 1, "max", None)),
    "pow": lambda cv, nd, a, k: h.power(cv, a[0], h._arg(a, k, 1, "exponent", None)),
    "max": lambda cv, nd, a, k: _max_min(cv, "max", a, k),
    "min": lambda cv, nd, a, k: _max_min(cv, "min", a, k),
    "amax": lambda cv, nd, a, k: _reduce(cv, "max", a, k),
    "amin": lambda cv, nd, a, k: _reduce(cv, "min", a, k),
    "sum": lambda cv, nd, a, k: _reduce(cv, "sum", a, k),
    "mean": lambda cv, nd, a, k: _reduce(cv, "mean", a, k),
    "logsumexp": lambda cv, nd, a, k: _reduce(cv, "logsumexp", a, k),
    "var": lambda cv, nd, a, k: _var(cv, "var", a, k),
    "std": lambda cv, nd, a, k: _var(cv, "std", a, k),
    "softmax": lambda cv, nd, a, k: _softmax(cv, a, k, log=False),
    "log_softmax": lambda cv, nd, a, k: _softmax(cv, a, k, log=True),
    "normalize": lambda cv, nd, a, k: _normalize(cv, a, k),
    "norm": lambda cv, nd, a, k: _norm(cv, a, k),
    "softsign": lambda cv, nd, a, k: cv.ew("div", a[0], cv.ew("add", cv.ew("abs", a[0]), 1.0)),
    "argmax": lambda cv, nd, a, k: _arg(cv, "argmax", a, k),
    "argmin": lambda cv, nd, a, k: _arg(cv, "argmin", a, k),
    "scaled_dot_product_attention": lambda cv, nd, a, k: attention.sdpa(
        cv, *(list(a) + [k.pop(n) for n in ("query", "key", "value") if n in k])[:3], k
    ),
    "vector_norm": lambda cv, nd, a, k: _vector_norm(cv, a, k),
    "mse_loss": lambda cv, nd, a, k: losses.mse_loss(cv, a[0], a[1], k),
    "l1_loss": lambda cv, nd, a, k: losses.l1_loss(cv, a[0], a[1], k),
    "smooth_l1_loss": lambda cv, nd, a, k: losses.smooth_l1_loss(
        cv, a[0], a[1], h._arg(a, k, 5, "beta", 1.0), k
    ),
    "huber_loss": lambda cv, nd, a, k: losses.huber_loss(
        cv, a[0], a[1], h._arg(a, k, 3, "delta", 1.0), k
    ),
    "kl_div": lambda cv, nd, a, k: losses.kl_div(cv, a[0], a[1], k),
    "cross_entropy": lambda cv, nd, a, k: losses.cross_entropy(cv, a[0], a[1], k),
    "pairwise_distance": lambda cv, nd, a, k: losses.pairwise_distance(
        cv, a[0], a[1], h._arg(a, k, 2, "p", 2.0), h._arg(a, k, 3, "eps", 1e-6),
        bool(h._arg(a, k, 4, "keepdim", False)),
    ),
    "triplet_margin_loss": lambda cv, nd, a, k: _triplet(cv, a, k),
    "cosine_similarity": lambda cv, nd, a, k: losses.cosine_similarity(
        cv, a[0], a[1], int(h._arg(a, k, 2, "dim", 1)), h._arg(a, k, 3, "eps", 1e-8)
    ),
    "layer_norm": lambda cv, nd, a, k: desugar.layer_norm(
        cv, h._tensor(a[0], "layer_norm"), tuple(h._arg(a, k, 1, "normalized_shape", ())),
        h._arg(a, k, 2, "weight", None), h._arg(a, k, 3, "bias", None),
        scalar(h._arg(a, k, 4, "eps", 1e-5)),
    ),
    "group_norm": lambda cv, nd, a, k: desugar.group_norm(
        cv, h._tensor(a[0], "group_norm"), scalar(h._arg(a, k, 1, "num_groups", 1)),
        h._arg(a, k, 2, "weight", None), h._arg(a, k, 3, "bias", None),
        scalar(h._arg(a, k, 4, "eps", 1e-5)),
    ),
    "linear": lambda cv, nd, a, k: h.linear(cv, a[0], a[1], h._arg(a, k, 2, "bias", None)),
    "matmul": lambda cv, nd, a, k: h.matmul(cv, a[0], a[1]),
    "mm": lambda cv, nd, a, k: h.matmul(cv, a[0], a[1]),
    "bmm": lambda cv, nd, a, k: h.matmul(cv, a[0], a[1], batched=True),
    "einsum": lambda cv, nd, a, k: h.einsum(cv, *a),
    "triu": lambda cv, nd, a, k: h.triangle(cv, "triu", a[0], h._arg(a, k, 1, "diagonal", 0)),
    "tril": lambda cv, nd, a, k: h.triangle(cv, "tril", a[0], h._arg(a, k, 1, "diagonal", 0)),
    **{f"max_pool{d}d": functools.partial(_max_pool, d) for d in (1, 2, 3)},
    **{f"avg_pool{d}d": functools.partial(_avg_pool, d) for d in (1, 2, 3)},
    **{f"max_pool{d}d_with_indices": functools.partial(_max_pool, d, indices=True)
       for d in (1, 2, 3)},
    "t": lambda cv, nd, a, k: h.transpose(a[0], 0, 1),
    "transpose": lambda cv, nd, a, k: h.transpose(a[0], a[1], a[2]),
    **{n: (lambda cv, nd, a, k: h.reshape(cv, nd, a[0], a[1:])) for n in h.VIEWS},
    **{n: (lambda cv, nd, a, k: a[0]) for n in h.IDENTITY},
    "to": lambda cv, nd, a, k: _to(a, k),
    "dropout": lambda cv, nd, a, k: _dropout(
        cv, a[0], h._arg(a, k, 1, "p", 0.5), h._arg(a, k, 2, "training", True)
    ),
    "getattr": lambda cv, nd, a, k: h.attribute_of(a[0], a[1]),
    "getitem": lambda cv, nd, a, k: h.shape_item(a[0], a[1]),
    "size": lambda cv, nd, a, k: _size(a),
}  # fmt: skip
FUNCS.update(scans.funcs(FUNCS))  # cumsum, cumprod and their reverse, exclusive forms

MODULE_UNARY = {
    "ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "SiLU": "silu", "Mish": "mish",
    "Hardsigmoid": "hardsigmoid", "Hardswish": "hardswish",
}  # fmt: skip


def _module(cv: Converter, node: Any, m: Any, path: str, a: A) -> Any:
    name = type(m).__name__
    x = a[0]
    if name in MODULE_UNARY:
        return cv.ew(MODULE_UNARY[name], x)
    if name == "Linear":
        return h.linear(cv, x, _leaf(m, path, "weight"), _leaf(m, path, "bias"))
    simple = {
        "GELU": lambda: h.gelu(cv, x, m.approximate),
        "LeakyReLU": lambda: cv.ew("leaky_relu", x, m.negative_slope),
        "ELU": lambda: cv.ew("elu", x, m.alpha),
        "Softplus": lambda: h.softplus(cv, x, m.beta, m.threshold),
        "ReLU6": lambda: h.clamp(cv, x, 0.0, 6.0),
        "Hardtanh": lambda: h.clamp(cv, x, m.min_val, m.max_val),
        "Softmax": lambda: _softmax(cv, (x, m.dim), {}, log=False),
        "LogSoftmax": lambda: _softmax(cv, (x, m.dim), {}, log=True),
        "Identity": lambda: x,
        "SELU": lambda: cv.ew("selu", x),
        "Softsign": lambda: cv.ew("div", x, cv.ew("add", cv.ew("abs", x), 1.0)),
        "MSELoss": lambda: losses.mse_loss(cv, x, a[1], {"reduction": m.reduction}),
        "L1Loss": lambda: losses.l1_loss(cv, x, a[1], {"reduction": m.reduction}),
        "SmoothL1Loss": lambda: losses.smooth_l1_loss(
            cv, x, a[1], m.beta, {"reduction": m.reduction}
        ),
        "HuberLoss": lambda: losses.huber_loss(cv, x, a[1], m.delta, {"reduction": m.reduction}),
        "KLDivLoss": lambda: losses.kl_div(
            cv, x, a[1], {"reduction": m.reduction, "log_target": m.log_target}
        ),
        "TripletMarginLoss": lambda: losses.triplet_margin_loss(
            cv, x, a[1], a[2], m.margin, m.p, m.eps, m.swap, m.reduction
        ),
        "PairwiseDistance": lambda: losses.pairwise_distance(cv, x, a[1], m.norm, m.eps, m.keepdim),
        "CosineSimilarity": lambda: losses.cosine_similarity(cv, x, a[1], m.dim, m.eps),
        "CrossEntropyLoss": lambda: losses.cross_entropy(
            cv,
            x,
            a[1],
            {
                "weight": m.weight,
                "ignore_index": m.ignore_index,
                "reduction": m.reduction,
                "label_smoothing": m.label_smoothing,
            },
        ),
        "Dropout": lambda: _dropout(cv, x, m.p, m.training),
        "Flatten": lambda: h.reshape(cv, node, x, ()),
        **{name: lambda: _pool_module(cv, node, m, x) for name in POOL_MODULES},
        "LayerNorm": lambda: desugar.layer_norm(
            cv,
            h._tensor(x, name),
            tuple(m.normalized_shape),
            _leaf(m, path, "weight"),
            _leaf(m, path, "bias"),
            scalar(m.eps),
        ),
        "GroupNorm": lambda: desugar.group_norm(
            cv,
            h._tensor(x, name),
            scalar(m.num_groups),
            _leaf(m, path, "weight"),
            _leaf(m, path, "bias"),
            scalar(m.eps),
        ),
        **{f"InstanceNorm{d}d": lambda: _instance_norm(cv, m, path, x) for d in (1, 2, 3)},
        # [N, C, L] (an input, left unanchored): per-channel statistics as 2d / 3d
        "BatchNorm1d": lambda: _batch_norm(cv, m, path, x, channels=_channels_first(m, a)),
        "BatchNorm2d": lambda: _batch_norm(cv, m, path, x, channels=True),
        "BatchNorm3d": lambda: _batch_norm(cv, m, path, x, channels=True),
    }
    if name not in simple:
        raise UnsupportedError(f"module {name}")
    return simple[name]()


def _instance_norm(cv: Converter, m: Any, path: str, x: Any) -> T:
    if m.track_running_stats:
        raise UnsupportedError(type(m).__name__, "with running statistics")
    w, b = _leaf(m, path, "weight"), _leaf(m, path, "bias")
    return desugar.instance_norm(cv, h._tensor(x, type(m).__name__), w, b, scalar(m.eps))


def _batch_norm(cv: Converter, m: Any, path: str, x: Any, channels: bool = False) -> T:
    w, b = _leaf(m, path, "weight"), _leaf(m, path, "bias")
    batch_stats = m.training or m.running_mean is None
    stats = None if batch_stats else (_leaf(m, path, "running_mean"), _leaf(m, path, "running_var"))
    update = None
    if m.training and m.running_mean is not None:
        counter = f"{path}.num_batches_tracked"
        momentum = (
            scalar(m.momentum)
            if m.momentum is not None
            else Scalar(1.0, f"1.0 / (int({counter}) + 1)")  # a cumulative average
        )
        running = (_leaf(m, path, "running_mean"), _leaf(m, path, "running_var"))
        update = (*running, momentum, counter)
    if channels:
        return desugar.batch_norm_channels(cv, x, stats, w, b, scalar(m.eps), update)
    return desugar.batch_norm(
        cv,
        h._tensor(x, "BatchNorm1d"),
        stats,
        w,
        b,
        scalar(m.eps),
        update,  # type: ignore[arg-type]
    )


# Targets that do not open a stage on an input: GEMMs open their own, views and attributes
# only describe it.
NO_ANCHOR = {"linear", "matmul", "mm", "bmm", "einsum", "scaled_dot_product_attention", "t",
             "transpose", "getattr", "getitem", "size", *h.VIEWS, *h.IDENTITY, *POOLS,
             *(f"{p}_with_indices" for p in POOLS)}  # fmt: skip
NO_ANCHOR_MODULES = {
    "Linear", "Identity", "Flatten", "Dropout", "BatchNorm2d", "BatchNorm3d", *POOL_MODULES,
}  # fmt: skip


def _channels_first(module: Any, args: A) -> bool:
    """Whether a BatchNorm1d normalizes an input [N, C, L] per channel (batch_norm_channels,
    as 2d and 3d do) rather than the features of [N, C] (batch_norm)."""
    x = args[0] if args else None
    return type(module).__name__ == "BatchNorm1d" and isinstance(x, Leaf) and len(x.shape) == 3


def _anchored(cv: Converter, args: A, kwargs: K) -> tuple[A, K]:
    """The first op of a program on its inputs alone (no GEMM before it) opens a stage
    anchored by nothing: its largest tensor argument, read as rows of its last dim, stands
    in for that input from here on (other inputs are aligned against it)."""
    leaves = [a for a in (*args, *kwargs.values()) if isinstance(a, Leaf)]
    if cv.stage >= 0 and leaves:  # the stage's own input again: its tile
        tiles = {e: t for e, t in cv.anchored.items() if t.stage == cv.stage}

        def tile_of(value: Any) -> Any:
            t = tiles.get(value.expr) if isinstance(value, Leaf) else None
            return t if t is not None and t.shape == value.shape else value

        return tuple(tile_of(a) for a in args), {k: tile_of(v) for k, v in kwargs.items()}
    if cv.stage >= 0 or not leaves:
        return args, kwargs
    if any(isinstance(a, T) for a in (*args, *kwargs.values())):
        return args, kwargs
    first = max(leaves, key=lambda leaf: math.prod(leaf.shape))
    tile = cv.anchor(first)

    def swap(value: Any) -> Any:
        return tile if value is first or value == first else value

    return tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()}


def dispatch(cv: Converter, node: Any, args: A, kwargs: K, gm: Any) -> Any:
    if node.op == "call_module":
        module = gm.get_submodule(node.target)
        if type(module).__name__ not in NO_ANCHOR_MODULES and not _channels_first(module, args):
            args, kwargs = _anchored(cv, args, kwargs)
        return _module(cv, node, module, f"self.{node.target}", args)
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if str(name) not in NO_ANCHOR:
        args, kwargs = _anchored(cv, args, kwargs)
    handler = FUNCS.get(str(name))
    if handler is None:
        raise UnsupportedError(str(name) or repr(node.target))
    if isinstance(args[0] if args else None, ShapeOf) and name not in ("getitem", "getattr"):
        raise UnsupportedError(f"{name} on a shape")
    return handler(cv, node, args, kwargs)
