"""Size sets derived for problems that bring none (KernelBench files as published).

`ci`: the sizes divided, all by one power of two F (the smallest that brings the inputs
under INPUT_BUDGET elements and every size under LARGEST), none below its floor, so the
reference runs in milliseconds on a CPU; one factor keeps the ratios between sizes
(`out_channels == 2 * width`, which a file's LayerNorm may need) except where a floor
stops a size. `unseen`: the sizes `ci` moved, a quarter larger and odd (an odd multiple
of what they must stay divisible by; a size 2 to MAX_RATIO times another at `ci` stays
so), so a kernel tuned at `ci` is checked at sizes that are no multiple of its tiles.

Sizes: integers (or their tuples and lists) bound at module level to a value that names no
other constant, at least MIN_SIZE (a batch: more than BATCH_FLOOR), not named like a kernel
size, stride, padding, dilation or a group or head count, and not written as a parameter
default in the code (`img_size=224`: the model expects that size). Constants computed from
others are not overridden: they follow.

What must stay divisible stays so: by a group or head count (a constant, or a parameter
default such as `num_groups=4`) and by its factors of 2 up to 4 (widths are halved or
quartered before being split); by a kept size (a block length); by a smaller size's new
value where the original was divisible (a patch divides an image, a block a sequence).
The floor of a size is FLOOR or the window of the file's kernels, whichever is larger.
A model that pools with a fixed window of GLOBAL_POOL or more (`nn.AvgPool2d(7)`) pools at
the resolution it was written for: the spatial sizes of its inputs are kept. One that
upsamples and concatenates (skip connections) keeps their factors of two at `unseen`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kforge_search.module_constants import Opaque, evaluate, free_constants, value_of

CI, UNSEEN = "ci", "unseen"
INPUT_BUDGET = 1 << 15  # elements over all of get_inputs() at ci sizes
LARGEST = 1024  # no size above this at ci
MIN_SIZE = 16  # smaller integers are counts (layers, ratios), not sizes
FLOOR = 8  # no size is divided below this (or below the file's kernel window)
BATCH_FLOOR = 2  # nor a batch below 2 (batch statistics need two values per channel)
GLOBAL_POOL = 5  # a fixed pooling window this large is a global pool
MAX_RATIO = 4  # a size 2 to 4 times another stays so where ci keeps it (out == 2 * width)
UNSEEN_GROWTH = 1.25
STRUCTURAL = {"kernel", "stride", "strides", "padding", "pad", "dilation", "groups", "heads"}
PARTS = {"groups", "heads"}  # counts that split a dimension into equal parts
FACTORIES = {"rand", "randn", "randint", "ones", "zeros", "empty", "full"}

SizeSet = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Slot:
    """One size: constant `name`, or element `index` of it."""

    name: str
    index: int | None
    value: int
    floor: int
    batch: bool


def derived_size_sets(tree: ast.Module, given: Mapping[str, SizeSet]) -> dict[str, SizeSet]:
    """`ci` and `unseen` where `given` (the file's KFORGE_SIZES) lacks them."""
    slots = size_slots(tree)
    parts = _part_counts(tree, slots)
    out: dict[str, SizeSet] = {}
    if CI in given:
        ci = _slot_values(slots, dict(given[CI]))
    else:
        ci = _ci_values(tree, slots, parts)
        out[CI] = _as_set(slots, ci, tree)
    if UNSEEN not in given:
        halved = _spatial_names(tree) if _joins_skips(tree) else set()
        out[UNSEEN] = _as_set(slots, _unseen_values(slots, ci, parts, halved), tree)
    return out


def is_structural(name: str) -> bool:
    """Named like a kernel size, stride, padding, dilation or a group or head count."""
    tokens = set(name.lower().split("_"))
    kernel = any(t.startswith("kernel") for t in tokens)
    return bool(tokens & STRUCTURAL) or kernel or _is_parts(name)


def _is_parts(name: str) -> bool:
    lowered = name.lower()
    return bool(set(lowered.split("_")) & PARTS) or lowered in {"n_head", "num_head", "nhead"}


def size_slots(tree: ast.Module) -> list[Slot]:
    """The sizes of a problem, in the order of its constants."""
    constants = free_constants(tree)
    hard_coded = _parameter_defaults(tree)
    kept = _spatial_names(tree) if _pools_globally(tree) else set()
    floor = max(FLOOR, _kernel_window(constants))
    slots: list[Slot] = []
    for name, value in constants.items():
        if is_structural(name) or name in kept:
            continue
        batch = "batch" in name.lower()
        items = list(enumerate(value)) if isinstance(value, tuple) else [(None, value)]
        for index, item in items:
            if type(item) is not int:
                continue
            if batch and item > BATCH_FLOOR:
                slots.append(Slot(name, index, item, BATCH_FLOOR, True))
            elif not batch and item >= MIN_SIZE and item not in hard_coded:
                slots.append(Slot(name, index, item, floor, False))
    return slots


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if type(v) is int]


def _kernel_window(constants: Mapping[str, Any]) -> int:
    """Pixels that the file's kernels and pools take together, dilated: a size at least
    this large leaves every window of the chain an output."""
    dilation = max(
        (v for n, x in constants.items() if "dilation" in n for v in _ints(x)), default=1
    )
    kernels = [
        max(_ints(x), default=1)
        for n, x in constants.items()
        if any(t.startswith("kernel") for t in n.lower().split("_"))
    ]
    return 1 + sum((k - 1) * max(dilation, 1) for k in kernels)


def _parameter_defaults(tree: ast.Module) -> set[int]:
    """Integers written as parameter defaults in the code (`img_size=224`), sizes only."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            for default in [*node.defaults, *node.kw_defaults]:
                if isinstance(default, ast.Constant) and type(default.value) is int:
                    found.add(default.value)
    return {v for v in found if v >= MIN_SIZE}


def _pools_globally(tree: ast.Module) -> bool:
    """Whether the code pools with a fixed literal window of GLOBAL_POOL or more."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if "pool" not in name.lower() or "adaptive" in name.lower():
            continue
        windows = [k.value for k in node.keywords if k.arg == "kernel_size"]
        first = node.args[1:2] if name.islower() else node.args[:1]  # F.avg_pool2d(x, 7)
        for window in [*windows, *first]:
            literal = isinstance(window, ast.Constant) and type(window.value) is int
            if literal and window.value >= GLOBAL_POOL:
                return True
    return False


def _joins_skips(tree: ast.Module) -> bool:
    """Whether the model upsamples and concatenates (an encoder-decoder with skip
    connections: its spatial sizes must survive halving and doubling)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    ups = any(n.startswith(("ConvTranspose", "Upsample", "interpolate")) for n in names)
    return ups and "cat" in names


def _spatial_names(tree: ast.Module) -> set[str]:
    """Constants named as the third and later dimensions of a 4-d or 5-d input draw."""
    names: set[str] = set()
    for call in _draws(tree):
        args = call.args
        if len(args) in (4, 5) and not any(isinstance(a, ast.Starred) for a in args):
            names.update(a.id for a in args[2:] if isinstance(a, ast.Name))
    return names


def _part_counts(tree: ast.Module, slots: list[Slot]) -> list[int]:
    """What sizes must stay divisible by: group and head counts of 2 or more (constants,
    or parameter defaults such as `num_groups=4`) and the sizes that are kept (a block
    length that must divide a sequence)."""
    constants = free_constants(tree)
    scaled = {s.name for s in slots}
    kept = {
        v
        for name, v in constants.items()
        if name not in scaled and not is_structural(name) and type(v) is int and v >= MIN_SIZE
    }
    counts = list(constants.items())
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = [
                *zip(
                    positional[len(positional) - len(node.defaults) :], node.defaults, strict=True
                ),
                *zip(node.kwonlyargs, node.kw_defaults, strict=True),
            ]
            counts += [(a.arg, d.value) for a, d in pairs if isinstance(d, ast.Constant)]
    parts = {v for name, v in counts if _is_parts(name) and type(v) is int and v >= 2}
    return sorted(parts | kept)


def _ci_values(tree: ast.Module, slots: list[Slot], parts: list[int]) -> dict[Slot, int]:
    originals = {s: s.value for s in slots}
    previous: dict[Slot, int] | None = None
    for power in range(48):
        factor = 1 << power
        targets = {s: min(s.value, max(s.floor, round(s.value / factor))) for s in slots}
        values = _constrained(
            slots, parts, targets, base=targets, ceiling=originals, fallback=originals
        )
        if values == previous:
            return values  # at the floors: nothing shrinks any more
        inputs = input_elements(tree, _overrides(slots, values, tree))
        largest = max((v for s, v in values.items() if not s.batch), default=0)
        if largest <= LARGEST and (inputs is None or inputs <= INPUT_BUDGET):
            return values
        previous = values
    return previous or {}


def _unseen_values(
    slots: list[Slot], ci: dict[Slot, int], parts: list[int], halved: set[str]
) -> dict[Slot, int]:
    """Sizes that ci moved (all, where it moved none) grow by UNSEEN_GROWTH to odd
    multiples (at most twice their ci value); the others keep their ci value. Sizes in
    `halved` keep the factors of two that they have at ci."""
    moved = {s for s in slots if ci[s] != s.value} or set(slots)
    targets = {s: round(ci[s] * UNSEEN_GROWTH) if s in moved else ci[s] for s in slots}
    ceiling = {s: 2 * ci[s] if s in moved else ci[s] for s in slots}
    steps = {s: ci[s] & -ci[s] for s in slots if s.name in halved}
    return _constrained(
        slots, parts, targets, base=ci, ceiling=ceiling, fallback=ci, odd=moved, steps=steps
    )


def _constrained(
    slots: list[Slot],
    parts: list[int],
    targets: dict[Slot, int],
    *,
    base: dict[Slot, int],
    ceiling: dict[Slot, int],
    fallback: dict[Slot, int],
    odd: set[Slot] | None = None,
    steps: dict[Slot, int] | None = None,
) -> dict[Slot, int]:
    """Each target moved to what its size must stay, smaller sizes first: a size that is
    2 to MAX_RATIO times a smaller one, in the original and in `base`, stays that multiple
    of its new value; else the nearest multiple (an odd one for `odd` sizes) of what it
    must stay divisible by (`steps`, its group and head counts, the smaller sizes that
    divide it). At most `ceiling`, else `fallback`."""
    values: dict[Slot, int] = {}
    for slot in sorted(slots, key=lambda s: s.value):
        step = (steps or {}).get(slot, 1)
        for k in parts:
            if slot.value % k == 0 and not slot.batch:
                step = math.lcm(step, k, math.gcd(slot.value, 4))
        exact = 0
        for other, new in values.items():
            related = other.value < slot.value and slot.value % other.value == 0
            if not related or other.batch or slot.batch:
                continue
            step = math.lcm(step, new)
            ratio = slot.value // other.value
            if ratio <= MAX_RATIO and base[slot] == ratio * base[other]:
                exact = max(exact, ratio * new)
        if exact and exact % step == 0 and exact <= ceiling[slot]:
            values[slot] = exact
            continue
        found = _multiple(targets[slot], step, ceiling[slot], slot in (odd or ()))
        values[slot] = found if found is not None else fallback[slot]
    return values


def _multiple(target: int, step: int, ceiling: int, odd: bool) -> int | None:
    """The multiple of `step` nearest `target` (odd multiples only when `odd`), at most
    `ceiling`; None when there is none."""
    q = max(1, round(target / step))
    if odd and q % 2 == 0:
        q += 1
    while q * step > ceiling and q > 1:
        q -= 2 if odd else 1
    return q * step if q * step <= ceiling else None


def _slot_values(slots: list[Slot], size_set: dict[str, Any]) -> dict[Slot, int]:
    """The sizes of a given size set (KFORGE_SIZES), slot by slot."""
    values: dict[Slot, int] = {}
    for s in slots:
        value = size_set.get(s.name, s.value)
        if s.index is not None and isinstance(value, tuple | list):
            value = value[s.index] if s.index < len(value) else s.value
        values[s] = value if type(value) is int else s.value
    return values


def _overrides(slots: list[Slot], values: dict[Slot, int], tree: ast.Module) -> dict[str, Any]:
    """Constant-level overrides for changed sizes (a tuple rebuilt with its new elements)."""
    constants = free_constants(tree)
    out: dict[str, Any] = {}
    for slot in slots:
        new = values.get(slot, slot.value)
        if new == slot.value:
            continue
        if slot.index is None:
            out[slot.name] = new
        else:
            items = list(out.get(slot.name, constants[slot.name]))
            items[slot.index] = new
            out[slot.name] = tuple(items)
    return out


def _as_set(slots: list[Slot], values: dict[Slot, int], tree: ast.Module) -> SizeSet:
    return tuple(sorted(_overrides(slots, values, tree).items()))


def input_elements(tree: ast.Module, overrides: Mapping[str, Any]) -> int | None:
    """Elements of the tensors that get_inputs() draws (torch.rand(...) and the like),
    from the constants with `overrides`; None when no draw's shape can be told."""
    env = evaluate(tree, overrides)
    total, known = 0, False
    for call in _draws(tree):
        try:
            shape = _shape(call, env)
        except Opaque:
            continue
        total += math.prod(shape)
        known = True
    return total if known else None


def _draws(tree: ast.Module) -> list[ast.Call]:
    """The tensor factory calls (torch.rand(...), ...) in get_inputs()."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            return [
                n
                for n in ast.walk(node)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in FACTORIES
            ]
    return []


def _shape(call: ast.Call, env: Mapping[str, Any]) -> list[int]:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    args = list(call.args)
    name = call.func.attr  # type: ignore[attr-defined]
    if "size" in keywords:
        args = [keywords["size"]]
    elif name == "randint":
        args = args[-1:]
    elif name == "full":
        args = args[:1]
    dims: list[Any] = []
    for arg in args:
        if isinstance(arg, ast.Starred):
            dims.extend(value_of(arg.value, env))
            continue
        value = value_of(arg, env)
        dims.extend(value if isinstance(value, tuple | list) else [value])
    if not dims or not all(type(d) is int and d >= 0 for d in dims):
        raise Opaque("shape")
    return dims
