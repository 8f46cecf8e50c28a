"""The worker says when it compiles inside a stage that runs the model (verify, time, unseen).

Triton compiles a kernel at its first call (and again for new sizes), an autotuner runs every
config, a candidate may call load_inline late: a first forward call can take a build's time.
Each such call sends {"type": "compiling", "on": true} before and {"on": false} after; the
parent times what lies between against the build limit instead of the stage's, which is
scaled to the problem's own time (evaluator/limits.py, sandbox.Child). A candidate that sent
these itself would only give itself the build limit.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
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


def announce(send: Send, targets: tuple[tuple[str, str, str], ...] = TARGETS) -> None:
    """Wrap every compile entry point found (once per process) so that it tells the parent."""
    depth = [0]

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def compiling(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            if depth[0] == 1:
                send("compiling", on=True)
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    send("compiling", on=False)

        compiling._kforge_announces = True  # type: ignore[attr-defined]
        return compiling

    for module_name, class_name, attr in targets:
        with contextlib.suppress(ImportError, AttributeError):
            owner = importlib.import_module(module_name)
            owner = getattr(owner, class_name) if class_name else owner
            fn = getattr(owner, attr)
            if not getattr(fn, "_kforge_announces", False):
                setattr(owner, attr, wrap(fn))
