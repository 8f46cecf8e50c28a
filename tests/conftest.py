"""Shared test set-up: one build/baseline cache per checkout, GPU tests skip without a GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("KFORGE_CACHE_DIR", str(ROOT / ".kforge-cache"))

PROBLEMS = ROOT / "problems"
EXAMPLES = ROOT / "examples" / "candidates"
BROKEN = ROOT / "tests" / "fixtures" / "broken"
FOREIGN_SUITE = ROOT / "tests" / "fixtures" / "foreign_suite"


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A run that collects nothing is a broken run, not a pass: turn pytest's exit 5 into 1.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
