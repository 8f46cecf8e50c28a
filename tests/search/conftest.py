"""One real local Ray cluster (2 CPUs) for the whole test session, started on first use."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    import ray

    # address="local": always a fresh cluster, never one named by RAY_ADDRESS
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def worker_pids(mode: str = "candidate") -> set[int]:
    """Evaluator child processes (python -m kforge_search.evaluator.worker) of one mode."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "kforge_search.evaluator.worker" not in cmd:
            continue
        # a spare (evaluator/spare.py) learns its job on stdin and moves into the job's folder
        with contextlib.suppress(OSError):
            cmd += "\0" + " ".join(os.listdir(os.readlink(f"/proc/{entry}/cwd")))
        if f"{mode}-job.json" in cmd and alive(int(entry)):
            pids.add(int(entry))
    return pids


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
