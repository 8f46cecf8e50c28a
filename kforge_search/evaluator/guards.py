"""Defences that run inside the candidate's process (see docs/evaluator.md, threat model).

Each guard records what it saw; worker.py turns findings into REJECTED with a named reason.
They are installed before the candidate is imported.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# aten operators a candidate's forward may dispatch besides its own kernels: allocation,
# views and copies (and metadata queries). Everything else is torch doing the work.
ALLOWED_OPS = frozenset(
    {
        # allocation
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
        "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like", "ones", "ones_like",
        "new_ones", "new_full", "scalar_tensor", "resize_", "set_",
        # views and layout
        "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand",
        "expand_as", "squeeze", "unsqueeze", "slice", "select", "alias", "detach", "narrow",
        "unbind", "split", "split_with_sizes", "chunk", "flatten", "unflatten", "view_as",
        "contiguous", "movedim", "_reshape_alias", "lift_fresh", "unfold",
        # copies and moves
        "copy_", "clone", "_to_copy", "to", "_copy_from", "_copy_from_and_resize",
        # stream bookkeeping
        "record_stream",
        # random draws: a random operator's draws come from torch's generator, so that the
        # same seed gives the reference's numbers (docs/evaluator.md, "Random operators")
        "bernoulli_", "native_dropout",
        # metadata
        "size", "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
        "is_contiguous", "numel", "dim", "is_same_size", "_local_scalar_dense", "item",
    }
)  # fmt: skip

# Audit events that change a file or its metadata: (index of a path, index of its dir_fd or
# -1) for each path they change. Both ends of a rename; both of a hard link (one to an outside
# file would be written through its inside name); a symlink's own name (what is written
# through it is resolved at open). Native code is confined by Landlock (landlock.py), which
# cannot confine chmod, chown, utime or xattrs: from Python they are refused here.
CHANGING_EVENTS: dict[str, tuple[tuple[int, int], ...]] = {
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "shutil.rmtree": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),  # os.replace too
    "os.link": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
    "os.truncate": ((0, -1),),  # a descriptor: ftruncate needs one opened for writing
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.utime": ((0, 3),),
    "os.setxattr": ((0, -1),),
    "os.removexattr": ((0, -1),),
}
METADATA_EVENTS = frozenset({"os.chmod", "os.chown", "os.utime", "os.setxattr", "os.removexattr"})

# Programs the toolchains run on their own (compilers, linkers, loaders); nothing else.
ALLOWED_PROGRAMS = frozenset(
    {
        "ninja", "c++", "g++", "gcc", "cc", "clang", "clang++", "nvcc", "ptxas", "cuobjdump",
        "nvdisasm", "fatbinary", "nvlink", "cicc", "ld", "as", "ldconfig", "which", "uname",
        "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++", "file",
    }
)  # fmt: skip


class OpRecorder:
    """A TorchDispatchMode that records aten operators outside ALLOWED_OPS."""

    def __new__(cls, allowed: Iterable[str] = ()) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode

        allow = ALLOWED_OPS | frozenset(allowed)

        class _Recorder(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.forbidden: dict[str, int] = {}

            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # torch's opt-out of wrapping __torch_dispatch__ in dynamo.disable: that
                # wrapper imports torch._dynamo at the first dispatch (1 s of a 2.5 s
                # evaluation on CPU), for a compiler that never traces this mode
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                name = func.overloadpacket.__name__
                if name not in allow:
                    self.forbidden[name] = self.forbidden.get(name, 0) + 1
                return func(*args, **(kwargs or {}))

        return _Recorder()


class LaunchCounter:
    """Counts kernel launches: Triton kernels (compiled or interpreted) and calls into
    C++/CUDA extensions built by load_inline."""

    def __init__(self) -> None:
        self.count = 0
        self.trace: Any = None  # a profile.LaunchTrace: each launch's name and host time

    def _counting(
        self, fn: Callable[..., Any], label: Callable[..., str] | None = None
    ) -> Callable[..., Any]:
        counter = self
        clock = time.perf_counter
        label = label or _kernel_name

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            trace = counter.trace
            if trace is None or not trace.on:
                return fn(*args, **kwargs)
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                trace.launches.append((label(*args), start, clock()))

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
        return wrapper

    def install_triton(self) -> None:
        try:
            from triton.runtime import jit
        except ImportError:
            return
        jit.JITFunction.run = self._counting(jit.JITFunction.run, _kernel_name)
        try:
            from triton.runtime import interpreter
        except ImportError:
            return
        interpreter.InterpretedFunction.run = self._counting(
            interpreter.InterpretedFunction.run, _kernel_name
        )

    def wrap_extension(self, module: Any, functions: Iterable[str] | None) -> Any:
        names = list(functions) if functions else [n for n in dir(module) if not n.startswith("_")]
        prefix = getattr(module, "__name__", "ext").rsplit(".", 1)[-1]
        for name in names:
            fn = getattr(module, name, None)
            if callable(fn):
                label = f"{prefix}.{name}"
                setattr(module, name, self._counting(fn, lambda *a, _l=label: _l))
        return module


def _kernel_name(kernel: Any = None, *args: Any) -> str:
    """A Triton kernel's function name (JITFunction / InterpretedFunction)."""
    fn = getattr(kernel, "fn", None)
    return str(getattr(fn, "__name__", None) or getattr(kernel, "__name__", "triton_kernel"))


def _lookup(obj: Any, attr: str) -> Any:
    return obj.get(attr) if isinstance(obj, dict) else getattr(obj, attr, None)


class Integrity:
    """Identities of the functions timing and verification rely on; any rebinding is found."""

    def __init__(self, targets: Iterable[tuple[str, Any, str]]):
        self._targets = list(targets)
        self._ids = {label: id(_lookup(obj, attr)) for label, obj, attr in self._targets}

    def changed(self) -> list[str]:
        return [
            label
            for label, obj, attr in self._targets
            if id(_lookup(obj, attr)) != self._ids[label]
        ]


def harness_targets() -> list[tuple[str, Any, str]]:
    """What a candidate must not rebind: clocks, CUDA timing, and the evaluator's modules."""
    import time

    import torch

    from kforge_search.evaluator import (
        buffers,
        build,
        child_failure,
        inputs,
        model_run,
        timed_runs,
        timing,
    )

    targets = [(f"time.{n}", time, n) for n in ("perf_counter", "perf_counter_ns", "monotonic")]
    targets += [(f"torch.{n}", torch, n) for n in ("equal", "save", "allclose", "no_grad")]
    targets += [(f"torch.Tensor.{n}", torch.Tensor, n) for n in ("clone", "to", "copy_")]
    targets += [("threading.enumerate", threading, "enumerate")]
    if torch.cuda.is_available():
        targets += [("torch.cuda.synchronize", torch.cuda, "synchronize")]
        targets += [("torch.cuda.Event", torch.cuda, "Event")]
        targets += [
            (f"torch.cuda.Event.{n}", torch.cuda.Event, n)
            for n in ("record", "elapsed_time", "synchronize")
        ]
    modules = (buffers, build, child_failure, inputs, sys.modules[__name__], timed_runs, timing)
    for module in (*modules, model_run):
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "__module__", "") == module.__name__:
                targets.append((f"{module.__name__}.{name}", module, name))
    # the worker as it runs: `python -m` makes it __main__ (an import of it would be a second
    # copy that runs nothing). Every harness function it calls by name is sealed there, its
    # own and those it imports (time_model, load_guarded: model_run's); outside a worker
    # (tests), the imported module
    running = running_worker() or importlib.import_module(WORKER)
    for name, value in vars(running).items():
        where = getattr(value, "__module__", None) or ""
        if callable(value) and (where == running.__name__ or where.startswith("kforge_search.")):
            targets.append((f"{WORKER}.{name}", running, name))
    targets += [(f"timing.METHODS[{k}]", timing.METHODS, k) for k in timing.METHODS]
    targets += [("inputs._HANDED", inputs, "_HANDED")]  # what a burst's inputs must avoid
    return targets


WORKER = "kforge_search.evaluator.worker"


def running_worker() -> Any:
    """The evaluator's worker module as it runs in this process (run as __main__ by
    `python -m kforge_search.evaluator.worker`), None elsewhere."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return main if getattr(spec, "name", "") == WORKER else None


class WorldGuard:
    """A Python audit hook: no writes outside allowed folders, no sockets, no programs other
    than the toolchain's. Violations are recorded and the operation is refused. Audit hooks
    cannot be removed once added; native code is checked separately (processes, sockets)."""

    def __init__(self, writable: Iterable[str | Path]):
        self.writable = tuple(str(Path(p).resolve()) for p in writable)
        self.violations: list[tuple[str, str]] = []
        self.spawns = 0  # programs started through Python (allowed ones)

    def _deny(self, reason: str, what: str) -> None:
        self.violations.append((reason, what))
        raise PermissionError(f"kforge sandbox: {what} is not allowed ({reason})")

    def _write_ok(self, path: Any) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        try:
            resolved = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        if resolved in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"):
            return True
        return any(resolved == root or resolved.startswith(root + os.sep) for root in self.writable)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = ((*tuple(args), None, None, 0))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            )
            if writing and not self._write_ok(path):
                self._deny("sandbox:write-outside", f"writing {path}")
        elif event in CHANGING_EVENTS:
            for index, dir_index in CHANGING_EVENTS[event]:
                path = _event_path(args, index, dir_index, event in METADATA_EVENTS)
                if path is not None and not self._write_ok(path):
                    what = f"{event} on {args[index]} (writing outside its folders)"
                    self._deny("sandbox:write-outside", what)
        elif event in {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo"}:
            self._deny("sandbox:socket", f"{event}")
        elif event in {"subprocess.Popen", "os.posix_spawn", "os.exec"}:
            program = os.path.basename(os.fsdecode(args[0])) if args and args[0] else "?"
            if program not in ALLOWED_PROGRAMS:
                self._deny("sandbox:subprocess", f"running {program}")
            self.spawns += 1
        elif event in {"os.system", "os.fork", "os.forkpty", "os.spawn", "pty.spawn"}:
            self._deny("sandbox:subprocess", f"{event}")

    def install(self) -> None:
        sys.addaudithook(self.hook)


def _event_path(args: tuple[Any, ...], index: int, dir_index: int, resolve_fd: bool) -> Any:
    """The path an audit event's argument names: joined to its dir_fd where relative; a
    descriptor stays one (WorldGuard allows it) unless `resolve_fd` (chmod of an outside file
    opened for reading), then it is the file it refers to. None: no such argument."""
    if index >= len(args) or args[index] is None:
        return None
    path = args[index]
    if isinstance(path, int):
        return f"/proc/self/fd/{path}" if resolve_fd else path
    dir_fd = args[dir_index] if 0 <= dir_index < len(args) else None
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(os.fsdecode(path)):
        return os.path.join(f"/proc/self/fd/{dir_fd}", os.fsdecode(path))
    return path


def reaped_children_activity() -> int:
    """Page faults of terminated, reaped children: grows whenever a child process ran."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_minflt + usage.ru_majflt


def python_threads() -> set[int]:
    return {t.ident or 0 for t in threading.enumerate() if t.is_alive()}


def child_processes() -> list[int]:
    """Processes whose parent is this process (compilers included, if still running)."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == me:
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def open_sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


def drop_privileges() -> None:
    """No capabilities (even as root) and no new privileges for this process and its
    children: with the parent undumpable, its memory cannot be read from here."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    pr_capbset_drop, pr_set_no_new_privs = 24, 38
    for cap in range(64):
        libc.prctl(pr_capbset_drop, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    libc.capset(ctypes.byref(header), data)
    libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0)
