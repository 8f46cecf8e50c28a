"""A spare worker's side (evaluator/spare.py is the parent's): warm up, say "ready", wait
for the job. Runs before any candidate code, in a process that will run exactly one job."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile


def warm_up(device: str) -> None:
    """A spare's start-up (evaluator/spare.py): what every job of this device would load."""
    import torch

    for name in ("torch.utils.cpp_extension", "triton", "triton.language"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):  # Triton hashes its own sources once per process
        from triton.runtime.cache import triton_key  # for its cache keys (~0.5 s on the H100

        triton_key()  # host), at its first kernel's compile: here, off the job's clock
    if device.startswith("cuda"):
        with contextlib.suppress(Exception):
            torch.cuda.init()
            with torch.device(device):  # a factory call under a device context, as every job
                torch.empty(1)  # draws its inputs (inputs.on_device): ~3.5 s of imports, once


def standby(device: str, fd: int) -> str:
    """Warm up, say so, then wait for the job file's path; its folder becomes this process's
    working and temporary folder. "" when the evaluator went away instead."""
    warm_up(device)
    os.write(fd, b'{"type": "ready"}\n')
    job_path = sys.stdin.readline().strip()
    if job_path:
        work = os.path.dirname(job_path)
        os.chdir(work)
        os.environ["TMPDIR"] = work
        tempfile.tempdir = None  # tempfile reads TMPDIR again
    return job_path
