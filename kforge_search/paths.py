"""Where kforge keeps its caches (builds, baselines, CPU peaks)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("KFORGE_CACHE_DIR") or Path.home() / ".cache" / "kforge"
    path = Path(root).absolute()  # children work in folders of their own: never relative
    path.mkdir(parents=True, exist_ok=True)
    return path


def pycache_dir() -> Path:
    """Compiled bytecode of the modules kforge's processes import (PYTHONPYCACHEPREFIX):
    where the interpreter's packages are read-only or ship without it (the GPU machine's
    torch: ~5 s of `compile` per process), each new process would compile them again."""
    path = cache_dir() / "pycache"
    path.mkdir(parents=True, exist_ok=True)
    return path
