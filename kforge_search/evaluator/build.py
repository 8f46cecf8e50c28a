"""Build stage (child process): import the candidate, with C++ builds cached by source hash."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kforge_search.evaluator.native_audit import NativeAudit

Wrap = Callable[[Any, Iterable[str] | None], Any]


class BuildError(Exception):
    """The candidate could not be imported or built; `log` holds the compiler output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NativeImportError(BuildError):
    """A built extension imports library compute (evaluator/native_audit.py)."""


def cache_cpp_builds(
    root: Path, wrap: Wrap | None = None, audit: NativeAudit | None = None
) -> None:
    """Make load_inline build into root/<name>-<hash of sources and flags>.

    The same extension source is then built once, whichever candidate file holds it, and two
    candidates that reuse an extension name never overwrite each other's build. `wrap` gets
    each built module and the names of its functions (the launch counter wraps them).
    `audit` (a native_audit.NativeAudit) checks each built .so's imports; a denied one
    raises NativeImportError (the audit keeps the verdict for the worker too).
    """
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline
    hooks = getattr(original, "_kforge_hooks", None)
    if getattr(original, "_kforge_cached", False):
        # installed already (by the screen, say, without a wrap): this caller's wrap and
        # audit from now on (a launch counter left out counted no launch of a later build)
        if hooks is not None and audit is not None:
            hooks["audit"] = audit
        if hooks is not None and wrap is not None:
            hooks["wrap"] = wrap
        return
    hooks: dict[str, Any] = {"audit": audit, "wrap": wrap}

    def load_inline(name: str, cpp_sources: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("build_directory") is None:
            key = repr((name, cpp_sources, args, sorted(kwargs.items(), key=lambda kv: kv[0])))
            digest = hashlib.sha256(key.encode()).hexdigest()[:16]
            build_dir = root / f"{name}-{digest}"
            build_dir.mkdir(parents=True, exist_ok=True)
            kwargs["build_directory"] = str(build_dir)
            with building(build_dir):
                module = original(name, cpp_sources, *args, **kwargs)
        else:
            module = original(name, cpp_sources, *args, **kwargs)
        if hooks["audit"] is not None:
            check_extension(module, hooks["audit"])
        wrapper = hooks["wrap"]
        return wrapper(module, kwargs.get("functions")) if wrapper else module

    load_inline._kforge_cached = True  # type: ignore[attr-defined]
    load_inline._kforge_hooks = hooks  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline


def check_extension(module: Any, audit: NativeAudit) -> None:
    """Hold a loaded extension's .so against the allowlist of native imports."""
    path = getattr(module, "__file__", None)
    if not path:
        return
    report = audit.check(path)
    if not report.ok:
        raise NativeImportError(audit.message())


@contextlib.contextmanager
def building(build_dir: Path) -> Iterator[None]:
    """One build at a time in `build_dir`, and none stuck behind a dead one. torch's own lock
    (a file named "lock", removed when its build ends) stays behind when the build is killed
    (a build over its time limit): every later build of that source would wait for it until
    its own limit. An flock is released by the kernel when its holder dies, so whoever holds
    it knows a "lock" file it finds is a dead build's."""
    with open(build_dir / "kforge-build.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # waits while a live process builds this source
        (build_dir / "lock").unlink(missing_ok=True)
        yield


def load_candidate_class(path: str, module_name: str = "kforge_candidate") -> type:
    """Import the candidate file and return its ModelNew class."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise BuildError(f"the candidate called sys.exit({exc.code}) at import") from exc
    except Exception as exc:
        log = str(exc) if "Error building extension" in str(exc) else ""
        raise BuildError(f"{type(exc).__name__} at import: {exc}", log) from exc
    model_new = getattr(module, "ModelNew", None)
    if not isinstance(model_new, type):
        raise BuildError("the module defines no class ModelNew")
    return model_new
