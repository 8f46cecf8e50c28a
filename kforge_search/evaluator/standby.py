"""A spare worker's side (evaluator/spare.py is the parent's): warm up, say "ready", wait
for the job. Runs before any candidate code, in a process that will run exactly one job."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from collections.abc import Iterator

SPARE_CONTEXTS_ENV = "KFORGE_SPARE_CONTEXTS"


def warm_up(device: str, context: bool = True) -> None:
    """A spare's start-up (evaluator/spare.py): what every job of this device would load.
    What touches the device runs under the device lock, held shared (devicelock.py): never
    beside another evaluator's timed runs. On a GPU that is its CUDA context and a first
    allocation; the imports before run on the host's other cores. On the CPU the whole
    warm-up is the device's work. `context` False: the imports only (a zygote's: zygote.py)."""
    from kforge_search.evaluator.devicelock import holding, one_at_a_time

    on_cpu = not device.startswith("cuda")
    # on the CPU not queued behind a waiting timing (devicelock.DeviceLock.hold): the imports
    # are seconds a timing would wait behind
    with holding(device, False, queue=False) if on_cpu else contextlib.nullcontext():
        warm_imports()
    if not on_cpu and context:
        import torch

        with contextlib.suppress(Exception):  # the driver's start: host work, off the lock
            torch.cuda.init()
        # a factory call under a device context, as every job draws its inputs
        # (inputs.on_device): ~3.5 s of imports, once. Queued behind a waiting timing: its
        # evaluator waits for "ready" holding nothing (pipeline._child). A context created
        # beside timed runs stalls them (H200: a 0.36 ms matmul's p99 +5-17%, single calls up
        # to 2.4 ms, with 4-8 processes creating contexts), so it is under the lock at all,
        # and one spare's at a time (devicelock.one_at_a_time), each under a hold of its own:
        # a timing then waits for one context, not for all that started together
        turn = contexts_one_at_a_time()
        with (
            one_at_a_time(device, "context") if turn else contextlib.nullcontext(),
            holding(device, False, queue=True),
            contextlib.suppress(Exception),
            torch.device(device),
        ):
            torch.empty(1)


def contexts_one_at_a_time() -> bool:
    """Whether a spare creates its CUDA context only while no other spare of its device
    does: yes, unless $KFORGE_SPARE_CONTEXTS=together. Together, 8 spares' holds took 0.98 s
    at the median (the driver makes ~5 contexts a second) and each timing waited for them;
    one at a time, 8 evaluators on an H200 gave 69.1 evaluations a GPU-minute against 63.0,
    the verify phase 3.68 s against 5.10 s (`bench --throughput`, call 42 of
    docs/results/h200-2026-11-29c). With the longer candidate steps of an older tree the
    same A/B had gained nothing (call 37 of docs/results/h200-2026-11-29)."""
    return os.environ.get(SPARE_CONTEXTS_ENV, "").strip() != "together"


def warm_imports() -> None:
    """What every job would import (a zygote's warm-up: zygote.py)."""
    import torch  # noqa: F401

    for name in ("torch.utils.cpp_extension", "triton", "triton.language"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):  # Triton hashes its own sources once per process
        from triton.runtime.cache import triton_key  # for its cache keys (~0.5 s on the H100

        triton_key()  # host), at its first kernel's compile: here, off the job's clock


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


@contextlib.contextmanager
def fork_safe_cuda_check() -> Iterator[None]:
    """torch.cuda.is_available() by NVML while inside (PyTorch's fork-safe check), as a
    zygote's imports need: the default check initializes the CUDA driver, and a process
    forked after that gets no CUDA (torch: "Cannot re-initialize CUDA in forked
    subprocess"). torch.utils.cpp_extension calls it when imported where nvcc is found.
    The environment is as it was afterwards, so a fork runs with the user's."""
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before


def fork_unfit(device: str) -> str:
    """Asked in a throwaway fork of a zygote (zygote.probe): why a fork cannot do a spare's
    work on `device`, "" when it can. On a GPU the fork creates a CUDA context and allocates,
    as a spare's warm-up does (under the device lock, held shared), so whatever broke CUDA
    in the zygote shows here, once, and not in a candidate's job."""
    if not device.startswith("cuda"):
        return ""
    import torch

    from kforge_search.evaluator.devicelock import holding

    if torch.cuda._is_in_bad_fork():
        return "CUDA was initialized in the zygote before it forked (torch's bad fork)"
    try:
        with holding(device, False, queue=False):
            torch.cuda.init()
            torch.empty(1, device=device)
            torch.cuda.synchronize(device)
    except Exception as exc:  # what a forked spare would meet
        return f"a fork gets no CUDA: {type(exc).__name__}: {str(exc)[:300]}"
    return ""


def standby(device: str, fd: int) -> str:
    """Warm up, say so, then wait for the job file's path; its folder becomes this process's
    working and temporary folder. "" when the evaluator went away instead."""
    from kforge_search.procs.cpu_parts import name_self

    name_self("kf.spare")  # its CPU, for the throughput's parts (procs/cpu_parts.py)
    warm_up(device)
    os.write(fd, b'{"type": "ready"}\n')
    job_path = sys.stdin.readline().strip()
    if job_path:
        work = os.path.dirname(job_path)
        os.chdir(work)
        os.environ["TMPDIR"] = work
        tempfile.tempdir = None  # tempfile reads TMPDIR again
    return job_path
