"""The elementwise functions and reductions the synthesizer emits, for Triton and C++.

One table keeps both backends in step: a Triton expression over `{0}`, `{1}` (simple names:
SSA values or scalars) and a C++ expression over `a`, `b` (floats) per function. The C++
library is rendered from this table once, so every problem shares one build.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    triton: str
    cpp: str
    helpers: tuple[str, ...] = ()  # Triton helper functions the expression calls
    # Sees where the element is: Triton `{row}` / `{col}` (the dialect's index expressions),
    # C++ `row` / `col` (int64); a third operand is the period of the rows (a matrix's row
    # count: the flattened rows are that many rows per matrix), `b` a double there.
    indexed: bool = False


_T_TANH = "_kf_tanh"
_T_SOFTPLUS = "_kf_softplus"
_T_GELU_TANH = "_kf_gelu_tanh"
_T_MISH = "_kf_mish"
T_TO_BF16 = "_kf_to_bf16"  # float32 to bfloat16, rounded to nearest even
# argmax / argmin in one walk (arg_walk.arg_pairs): the index in a packed key's low word
T_ARG_DONE = {"max": "_kf_argmax_done", "min": "_kf_argmin_done"}

ELEMENTWISE: tuple[OpSpec, ...] = (
    OpSpec("add", 2, "({0} + {1})", "a + b"),
    OpSpec("sub", 2, "({0} - {1})", "a - b"),
    OpSpec("mul", 2, "({0} * {1})", "a * b"),
    OpSpec("div", 2, "({0} / {1})", "a / b"),
    OpSpec("maximum", 2, "tl.maximum({0}, {1})", "a > b ? a : b"),
    OpSpec("minimum", 2, "tl.minimum({0}, {1})", "a < b ? a : b"),
    OpSpec("leaky_relu", 2, "tl.where({0} > 0.0, {0}, {0} * {1})", "a > 0.0f ? a : a * b"),
    OpSpec("elu", 2, "tl.where({0} > 0.0, {0}, {1} * (tl.exp({0}) - 1.0))",
           "a > 0.0f ? a : b * (kf_exp(a) - 1.0f)"),
    OpSpec("neg", 1, "(-{0})", "-a"),
    OpSpec("relu", 1, "tl.maximum({0}, 0.0)", "a > 0.0f ? a : 0.0f"),
    OpSpec("sigmoid", 1, "tl.sigmoid({0})", "1.0f / (1.0f + kf_exp(-a))"),
    OpSpec("tanh", 1, _T_TANH + "({0})", "kf_tanh(a)", (_T_TANH,)),
    OpSpec("gelu", 1, "(0.5 * {0} * (1.0 + tl.math.erf({0} * 0.7071067811865476)))",
           "0.5f * a * (1.0f + kf_erf(a * 0.70710678118654752f))"),
    OpSpec("gelu_tanh", 1, _T_GELU_TANH + "({0})",
           "0.5f * a * (1.0f + kf_tanh(0.7978845608028654f * (a + 0.044715f * a * a * a)))",
           (_T_TANH, _T_GELU_TANH)),
    OpSpec("silu", 1, "({0} * tl.sigmoid({0}))", "a / (1.0f + kf_exp(-a))"),
    OpSpec("softplus", 1, _T_SOFTPLUS + "({0})", "kf_softplus(a)",
           (_T_SOFTPLUS,)),
    OpSpec("mish", 1, _T_MISH + "({0})", "kf_mish(a)", (_T_MISH,)),
    OpSpec("exp", 1, "tl.exp({0})", "kf_exp(a)"),
    OpSpec("log", 1, "tl.log({0})", "kf_log(a)"),
    OpSpec("sqrt", 1, "tl.sqrt({0})", "std::sqrt(a)"),
    OpSpec("rsqrt", 1, "(1.0 / tl.sqrt({0}))", "1.0f / std::sqrt(a)"),
    OpSpec("abs", 1, "tl.abs({0})", "std::fabs(a)"),
    OpSpec("square", 1, "({0} * {0})", "a * a"),
    OpSpec("reciprocal", 1, "(1.0 / {0})", "1.0f / a"),
    OpSpec("erf", 1, "tl.math.erf({0})", "kf_erf(a)"),
    OpSpec("hardsigmoid", 1, "tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
           "std::fmin(std::fmax(a / 6.0f + 0.5f, 0.0f), 1.0f)"),
    OpSpec("hardswish", 1, "({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)",
           "a * std::fmin(std::fmax(a + 3.0f, 0.0f), 6.0f) / 6.0f"),
    # torch.triu / torch.tril: x where col - row >= diagonal (<= for tril), else exactly 0
    # (a select, never a product: inf and NaN outside the triangle become 0 as in torch)
    OpSpec("triu", 3, "tl.where(({col} - {row} % tl.cast({2}, tl.int32)) >= {1}, {0}, 0.0)",
           "col - row >= b ? a : 0.0f", indexed=True),
    # argmax / argmin: the element's index along the reduced dim where it equals the
    # statistic {1}, else +inf (a min over these is the first such index, as torch's)
    OpSpec("argpos_col", 3,
           "tl.where({0} == {1}, ({col} + 0 * {row}).to(tl.float32), float('inf'))",
           "a == b ? static_cast<float>(col) : INFINITY", indexed=True),
    OpSpec("argpos_row", 3,
           "tl.where({0} == {1}, ({row} % tl.cast({2}, tl.int32) + 0 * {col}).to(tl.float32), "
           "float('inf'))",
           "a == b ? static_cast<float>(row) : INFINITY", indexed=True),
    # cross entropy's target logit: x where the column is the row's class index t, else 0
    OpSpec("pick_col", 3, "tl.where(({col} + 0 * {row}) == {1}.to(tl.int32), {0}, 0.0)",
           "col == static_cast<int64_t>(b) ? a : 0.0f", indexed=True),
    OpSpec("not_equal", 2, "tl.where({0} != {1}, 1.0, 0.0)", "a != b ? 1.0f : 0.0f"),
    OpSpec("tril", 3, "tl.where(({col} - {row} % tl.cast({2}, tl.int32)) <= {1}, {0}, 0.0)",
           "col - row <= b ? a : 0.0f", indexed=True),
    OpSpec("selu", 1,
           "(1.0507009873554805 * tl.where({0} > 0.0, {0}, "
           "1.6732632423543772 * (tl.exp({0}) - 1.0)))",
           "1.0507009873554805f * (a > 0.0f ? a : 1.6732632423543772f * (kf_exp(a) - 1.0f))"),
    # x log x, 0 at x == 0 (torch.xlogy(x, x), the entropy term of kl_div)
    OpSpec("xlogx", 1, "tl.where({0} == 0.0, 0.0, {0} * tl.log({0}))",
           "a == 0.0f ? 0.0f : a * kf_log(a)"),
    # smooth L1 of a difference d with beta b: 0.5 d^2 / b below b, |d| - 0.5 b above
    OpSpec("smooth_l1", 2,
           "tl.where(tl.abs({0}) < {1}, 0.5 * {0} * {0} / {1}, tl.abs({0}) - 0.5 * {1})",
           "std::fabs(a) < b ? 0.5f * a * a / b : std::fabs(a) - 0.5f * b"),
)  # fmt: skip

OPS: dict[str, OpSpec] = {op.name: op for op in ELEMENTWISE}

# Triton helpers, emitted once into a candidate when an expression calls them.
TRITON_HELPERS: dict[str, str] = {
    _T_TANH: (
        "@triton.jit\n"
        "def _kf_tanh(x):\n"
        "    # tanh from one exp, stable for large |x|\n"
        "    t = tl.exp(-2.0 * tl.abs(x))\n"
        "    y = (1.0 - t) / (1.0 + t)\n"
        "    return tl.where(x >= 0.0, y, -y)\n"
    ),
    _T_SOFTPLUS: (
        "@triton.jit\n"
        "def _kf_softplus(x):\n"
        "    # log(1 + exp(x)), linear above 20 as torch's softplus\n"
        "    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))\n"
    ),
    _T_MISH: (
        "@triton.jit\n"
        "def _kf_mish(x):\n"
        "    # x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2): one exp\n"
        "    e = tl.exp(tl.minimum(x, 20.0))\n"
        "    n = e * (e + 2.0)\n"
        "    return tl.where(x > 20.0, x, x * n / (n + 2.0))\n"
    ),
    _T_GELU_TANH: (
        "@triton.jit\n"
        "def _kf_gelu_tanh(x):\n"
        "    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
        "    return 0.5 * x * (1.0 + _kf_tanh(inner))\n"
    ),
    T_ARG_DONE["max"]: (
        "@triton.jit\n"
        "def _kf_argmax_done(acc, axis: tl.constexpr):\n"
        "    # the largest key's index: its low word holds 2**31 - 1 - index (the first wins)\n"
        "    return 2147483647 - (tl.max(acc, axis=axis) & 0xFFFFFFFF)\n"
    ),
    T_ARG_DONE["min"]: (
        "@triton.jit\n"
        "def _kf_argmin_done(acc, axis: tl.constexpr):\n"
        "    # the least key's index: its low word holds the index (the first wins)\n"
        "    return tl.min(acc, axis=axis) & 0xFFFFFFFF\n"
    ),
    T_TO_BF16: (
        "@triton.jit\n"
        "def _kf_to_bf16(x):\n"
        "    # float32 to bfloat16 rounded to nearest, ties to even, by the bits (Triton's\n"
        "    # interpreter truncates a plain cast; on a GPU this is the same rounding)\n"
        "    b = x.to(tl.uint32, bitcast=True)\n"
        "    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16\n"
        "    return b.to(tl.uint16).to(tl.bfloat16, bitcast=True)\n"
    ),
}


@dataclass(frozen=True)
class ReduceSpec:
    name: str
    identity: str  # Triton literal
    combine: str  # Triton expression of {0} (accumulator) and {1} (value)
    finish: str  # Triton reduction function
    cpp_code: int
    # the accumulator's dtype in Triton: sums in float64 (a long row of large values, e.g.
    # LayerNorm of inputs + 1000, loses its mean to float32 rounding), extremes in float32
    acc: str = "tl.float32"


REDUCTIONS: dict[str, ReduceSpec] = {
    "sum": ReduceSpec("sum", "0.0", "({0} + {1})", "tl.sum", 0, "tl.float64"),
    "max": ReduceSpec("max", "float('-inf')", "tl.maximum({0}, {1})", "tl.max", 1),
    "min": ReduceSpec("min", "float('inf')", "tl.minimum({0}, {1})", "tl.min", 2),
}


def cpp_opcode(name: str) -> int:
    """The C++ library's code of an elementwise function (its index in ELEMENTWISE)."""
    return next(i for i, op in enumerate(ELEMENTWISE) if op.name == name)
