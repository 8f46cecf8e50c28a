"""Trace a problem's Model with torch.fx on the meta device (no memory, no compute).

Plain int and float attributes of the model (and tuples of them) are wrapped in
`int`/`float` subclasses that remember their attribute path before tracing, so a constant in
the graph such as `0.5` in `x * self.scaling_factor` is known to come from
`self.scaling_factor` and is read there at run time by the generated ModelNew (not baked in).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.problem import Problem, exec_problem


class NamedInt(int):
    source: str

    def __new__(cls, value: int, source: str) -> NamedInt:
        obj = super().__new__(cls, value)
        obj.source = source
        return obj


class NamedFloat(float):
    source: str

    def __new__(cls, value: float, source: str) -> NamedFloat:
        obj = super().__new__(cls, value)
        obj.source = source
        return obj


def source_of(value: Any) -> str:
    """The run-time expression of a traced constant ("" when it is a literal)."""
    return getattr(value, "source", "")


@dataclass(frozen=True)
class Traced:
    graph_module: Any  # torch.fx.GraphModule, node.meta["tensor_meta"] filled in
    model: Any  # the Model on the meta device, scalar attributes wrapped
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    scalar_inputs: dict[str, float] = field(default_factory=dict)  # numbers passed to forward
    # the dtype of the values the program computes ("float32", "float16" or "bfloat16"): its
    # float output's; the kernels load in the inputs' dtypes and compute in float32
    dtype: str = "float32"


def _wrap_scalars(model: Any) -> None:
    for path, module in model.named_modules():
        prefix = f"self.{path}." if path else "self."
        for key, value in list(vars(module).items()):
            if key.startswith("_"):
                continue
            if type(value) in (int, float):
                module.__dict__[key] = _named(value, prefix + key)
            elif type(value) is tuple and all(type(v) in (int, float) for v in value):
                # a tuple of sizes (an image's channels, height, width): each element named
                module.__dict__[key] = tuple(
                    _named(v, f"{prefix}{key}[{i}]") for i, v in enumerate(value)
                )


def _named(value: int | float, source: str) -> NamedInt | NamedFloat:
    return NamedInt(value, source) if type(value) is int else NamedFloat(value, source)


def trace_problem(problem: Problem) -> Traced | Unsupported:
    """The problem's Model traced at its sizes, or why it cannot be."""
    saved = dict(os.environ)
    try:
        return _trace(problem)
    finally:
        # Importing torch._dynamo (fx does) sets TORCHINDUCTOR_CACHE_DIR in os.environ; the
        # evaluator's children inherit the environment, so leave it as it was.
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        os.environ.update(saved)


def _trace(problem: Problem) -> Traced | Unsupported:
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    module = exec_problem(problem)
    try:
        with torch.device("meta"):
            init = list(module.get_init_inputs())
            model = module.Model(*init)
            inputs = list(module.get_inputs())
    except Exception as exc:  # the problem's own code on the meta device
        return Unsupported("meta-device construction", f"{type(exc).__name__}: {exc}")
    if not all(_number(x) or isinstance(x, torch.Tensor) for x in inputs):
        kinds = sorted({type(x).__name__ for x in inputs if not isinstance(x, torch.Tensor)})
        return Unsupported("non-tensor forward inputs", f"of type {', '.join(kinds)}")
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    numbers = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    leaves = [*tensors, *model.parameters(), *model.buffers()]
    known = (*numbers, *_floats())
    odd = sorted({str(x.dtype).removeprefix("torch.") for x in leaves if x.dtype not in known})
    if odd:
        return Unsupported(
            "dtype",
            f"{', '.join(odd)}: the synthesizer emits float32, float16 and bfloat16 kernels "
            "(bool and integer inputs as numbers)",
        )
    _wrap_scalars(model)
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as exc:
        return Unsupported("torch.fx tracing", f"{type(exc).__name__}: {str(exc)[:200]}")
    # torch's BatchNorm with momentum=None reads num_batches_tracked as a number, which a
    # meta tensor cannot give: shapes do not depend on it, so propagate with a momentum
    cumulative = [
        m for m in gm.modules() if hasattr(m, "momentum") and m.momentum is None and m.training
    ]
    for m in cumulative:
        m.momentum = 0.1
    try:
        ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        return Unsupported("shape propagation", f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        for m in cumulative:
            m.momentum = None
    dtype = program_dtype(gm, {x.dtype for x in leaves if x.is_floating_point()})
    if isinstance(dtype, Unsupported):
        return dtype
    names = tuple(n.target for n in gm.graph.nodes if n.op == "placeholder")
    pairs = list(zip(names, inputs, strict=False))
    others = {
        name for name, x in pairs if isinstance(x, torch.Tensor) and not x.is_floating_point()
    }
    refused = _numbers_refused(gm, others, dtype) if others else None
    if refused is not None:
        return refused
    scalars = {name: float(x) for name, x in pairs if _number(x)}
    shapes = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else () for x in inputs)
    return Traced(gm, model, names, shapes, scalars, str(dtype).removeprefix("torch."))


def _floats() -> tuple[Any, ...]:
    import torch

    return (torch.float32, torch.float16, torch.bfloat16)


def program_dtype(gm: Any, leaves: set[Any]) -> Any:
    """The one float dtype of the values a traced program computes (torch's promotion, as
    the shapes' propagation found it), or why there is none the kernels can reproduce.

    float32 values may come from float16 or bfloat16 leaves (a float16 input times a float32
    parameter is float32, its input converted exactly). float16 or bfloat16 values must be
    all of one dtype, their leaves too: torch rounds each op's result to that dtype, the
    kernels compute in float32 and round the output once, which is within the policy's
    tolerance for it; a low-precision value promoted to float32 (float16 + float32 tensors
    after some float16 op) would carry torch's intermediate rounding into a float32 output,
    which float32's tolerance does not cover."""
    import torch
    from torch.fx.passes.shape_prop import TensorMetadata

    computed = {
        node.meta["tensor_meta"].dtype
        for node in gm.graph.nodes
        if node.op.startswith("call")
        and isinstance(node.meta.get("tensor_meta"), TensorMetadata)
        and node.meta["tensor_meta"].dtype.is_floating_point
    }
    values = computed or leaves or {torch.float32}
    if len(values) > 1:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in values))
        return Unsupported(
            "mixed dtypes",
            f"values of {names} are computed: torch rounds the low-precision ones before "
            "promoting them, the kernels compute in float32 and would not; make the program's "
            "float tensors one dtype (model.half() or .to(torch.bfloat16) with inputs to match)",
        )
    (dtype,) = values
    if dtype != torch.float32 and leaves - {dtype}:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in leaves))
        return Unsupported(
            "mixed dtypes",
            f"{names} inputs or parameters in a {str(dtype).removeprefix('torch.')} program "
            "(a 0-dim tensor of another dtype does not promote): make them one dtype",
        )
    return dtype


def _number(value: Any) -> bool:
    """A Python int or float passed to forward (not a bool): read there as a scalar."""
    return type(value) in (int, float)


# What a bool or integer input may feed: arithmetic with float32 values, whose result the
# kernels compute from the input loaded and converted to float32 (x * mask).
ARITHMETIC = {
    "mul", "imul", "multiply", "add", "iadd", "sub", "isub", "subtract", "rsub", "truediv",
    "itruediv", "div", "true_divide", "divide",
}  # fmt: skip
# ... or be the class indices of a classification loss (read as numbers: exact below 2^24)
CLASS_INDICES = {"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"}


def _numbers_refused(gm: Any, names: set[str], dtype: Any) -> Unsupported | None:
    """Why a program with bool or integer inputs cannot be computed in float32, or None:
    such an input must only meet arithmetic, and every value computed must be of the
    program's float dtype (an integer or bool result, such as mask * 2 or ~mask, would need
    kernels of its dtype)."""
    from torch.fx.passes.shape_prop import TensorMetadata

    for node in gm.graph.nodes:
        if node.op == "placeholder" and node.target in names:
            for user in node.users:
                name = user.target if user.op == "call_method" else ""
                if user.op == "call_module":
                    name = type(gm.get_submodule(user.target)).__name__
                name = name or getattr(user.target, "__name__", str(user.target))
                if name in CLASS_INDICES and user.args[1:2] == (node,):
                    continue
                if user.op not in ("call_function", "call_method") or name not in ARITHMETIC:
                    why = f"{node.target} ({node.meta['tensor_meta'].dtype}) used by {name}"
                    return Unsupported("a bool or integer input", f"{why}: only in arithmetic")
        meta = node.meta.get("tensor_meta")
        float_result = not isinstance(meta, TensorMetadata) or meta.dtype == dtype
        if node.op.startswith("call") and not float_result:
            what = str(dtype).removeprefix("torch.")
            return Unsupported(f"a non-{what} result", f"{node.name} is {meta.dtype}")
    return None
