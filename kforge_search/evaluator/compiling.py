"""The worker says when it compiles inside a stage that runs the model (verify, time, unseen).

Triton compiles a kernel at its first call (and again for new sizes), an autotuner runs every
config, a candidate may call load_inline late: a first forward call can take a build's time.
Each such call sends {"type": "compiling", "on": true} before and {"on": false} after; the
parent times what lies between against the build limit instead of the stage's, which is
scaled to the problem's own time (evaluator/limits.py, sandbox.Child). A candidate that sent
these itself would only give itself the build limit.

On a GPU a candidate's compile also runs off the device lock (`OffLane`, `off_lane`): its
kernels finish, it says "aside" (the parent lets its shared hold go) and after the compile
it waits at a safe point ("pause") until the parent holds the lock shared again. A compile
is CPU work; under the hold, every timing of the GPU waited for it (H200, 8 actors: shared
holds of 4.2 s median, a timing waited 8.3 s for them, the lane busy 29%). A candidate that
sent "aside" itself and ran kernels meanwhile would run them beside another's timed runs:
those runs' own checks (their spread, the wall clock of the burst) are what stands there.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Send = Callable[..., None]

# (module, class or "", attribute): where a compile (or an autotuner's trial runs) starts
TARGETS = (
    ("triton.compiler", "", "compile"),  # what JITFunction imports when it first runs (3.x)
    ("triton.runtime.jit", "JITFunction", "_do_compile"),
    ("triton.runtime.autotuner", "Autotuner", "_bench"),
    ("torch.utils.cpp_extension", "", "load_inline"),
    ("torch.utils.cpp_extension", "", "load"),
)


# the targets that compile without touching the device (an autotuner's trials run kernels)
OFF_LANE_TARGETS = frozenset(t for t in TARGETS if t[2] != "_bench")


@dataclass(frozen=True)
class OffLane:
    """How a compile leaves the device lock and comes back (a candidate's child on a GPU):
    `leave()` before its first off-lane compile (the child's kernels finished, then the
    parent lets its shared hold go), `back()` after it (the hold back, behind any timing that
    waits, before the child's next kernel runs)."""

    leave: Callable[[], None]
    back: Callable[[], None]


def off_lane(device: str, send: Send, back: Callable[[], None]) -> OffLane | None:
    """A candidate's child's way off the device lock and back (`back`: its safe point): on a
    GPU only (on the CPU a compile is the timed runs' own resource); its kernels end first."""
    if not device.startswith("cuda"):
        return None

    def leave() -> None:
        import torch

        torch.cuda.synchronize()
        send("aside")

    return OffLane(leave, back)


def announce(
    send: Send,
    targets: tuple[tuple[str, str, str], ...] = TARGETS,
    off_lane: OffLane | None = None,
    off_targets: frozenset[tuple[str, str, str]] = OFF_LANE_TARGETS,
) -> None:
    """Wrap every compile entry point found (once per process) so that it tells the parent;
    with `off_lane`, an outermost compile of `off_targets` also runs off the device lock."""
    depth, away = [0], [0]

    def wrap(fn: Callable[..., Any], off: bool) -> Callable[..., Any]:
        @functools.wraps(fn)
        def compiling(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            if depth[0] == 1:
                send("compiling", on=True)
            leaves = off and off_lane is not None and away[0] == 0
            if leaves:
                away[0] += 1
                off_lane.leave()  # type: ignore[union-attr]
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    send("compiling", on=False)  # the wait for the lane is no build time
                if leaves:
                    away[0] -= 1
                    off_lane.back()  # type: ignore[union-attr]

        compiling._kforge_announces = True  # type: ignore[attr-defined]
        return compiling

    for target in targets:
        module_name, class_name, attr = target
        with contextlib.suppress(ImportError, AttributeError):
            owner = importlib.import_module(module_name)
            owner = getattr(owner, class_name) if class_name else owner
            fn = getattr(owner, attr)
            if not getattr(fn, "_kforge_announces", False):
                setattr(owner, attr, wrap(fn, target in off_targets))
