"""The harness's integrity check, extended to what no audit event guards in CPython 3.11: the
captured clocks (a frozen dataclass: `object.__setattr__(clocks, "perf_counter", slow)`
changes it without an event) and the attributes of the harness's classes
(`guards.OpRecorder.__new__ = ...`: a class keeps its identity while its methods change).

The worker seals before any candidate code runs (load_guarded) and checks after each stage
(Guarded.check_harness): a change is REJECTED `dynamic:harness-patched`, named. The seal keeps
the objects themselves, not their ids, so a replacement cannot reuse a freed one's id.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from typing import Any

from kforge_search.evaluator import guards

# Class members that CPython adds on its own (a class's annotations, made on first read).
SELF_ADDED = frozenset({"__annotations__"})


@dataclasses.dataclass(frozen=True)
class Sealed:
    """One class's members as sealed; `strict`: members added later count too."""

    cls: type
    members: dict[str, Any]
    strict: bool

    def changed(self) -> list[str]:
        now = dict(vars(self.cls))
        names = set(self.members)
        if self.strict:
            names |= set(now) - SELF_ADDED
        missing = object()
        return [
            f"{self.cls.__module__}.{self.cls.__qualname__}.{name}"
            for name in sorted(names)
            if now.get(name, missing) is not self.members.get(name, missing)
        ]


class Seal(guards.Integrity):
    """guards.Integrity over harness_targets(), plus the clocks' fields and classes."""

    def __init__(
        self,
        targets: Iterable[tuple[str, Any, str]],
        fields: Iterable[tuple[str, Any, str]] = (),
        classes: Iterable[tuple[type, bool]] = (),
    ):
        super().__init__(targets)
        self._fields = [(label, obj, attr, getattr(obj, attr)) for label, obj, attr in fields]
        self._classes = [Sealed(cls, dict(vars(cls)), strict) for cls, strict in classes]

    def changed(self) -> list[str]:
        found = super().changed()
        found += [
            label for label, obj, attr, value in self._fields if getattr(obj, attr) is not value
        ]
        for sealed in self._classes:
            found += sealed.changed()
        return found


def clock_fields(clocks: Any) -> list[tuple[str, Any, str]]:
    """Every field of the captured timing.Clocks, and its class."""
    if clocks is None:
        return []
    names = [f.name for f in dataclasses.fields(clocks)]
    return [(f"clocks.{name}", clocks, name) for name in [*names, "__class__"]]


def harness_modules() -> list[Any]:
    """The evaluator's modules loaded in this process; the worker itself runs as __main__."""
    found = [m for n, m in list(sys.modules.items()) if n.startswith("kforge_search.") and m]
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and str(getattr(spec, "name", "")).startswith("kforge_search."):
        found.append(main)
    return found


def harness_classes() -> list[tuple[type, bool]]:
    """The classes the harness defines (strict), and the base of the op recorder (torch's
    TorchDispatchMode: its __enter__ pushes the recorder)."""
    classes: list[tuple[type, bool]] = []
    for module in harness_modules():
        name = module.__name__
        classes += [
            (v, True)
            for v in list(vars(module).values())
            if isinstance(v, type) and v.__module__ == name
        ]
    from torch.utils import _python_dispatch

    classes.append((_python_dispatch.TorchDispatchMode, False))
    return classes


def dispatch_targets() -> list[tuple[str, Any, str]]:
    """The functions torch's dispatch modes are pushed and popped with (the recorder)."""
    from torch.utils import _python_dispatch

    return [
        (f"torch.utils._python_dispatch.{name}", _python_dispatch, name)
        for name, value in list(vars(_python_dispatch).items())
        if callable(value) and not isinstance(value, type)
    ]


def harness_seal(clocks: Any = None) -> Seal:
    """Sealed before any candidate code runs: harness_targets(), the clocks, the classes."""
    targets = guards.harness_targets() + dispatch_targets()
    return Seal(targets, clock_fields(clocks), harness_classes())
