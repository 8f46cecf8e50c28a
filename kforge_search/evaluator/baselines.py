"""Baselines (the reference in eager mode and under torch.compile), cached on disk.

The cache key is (problem id, sizes, platform, device name, torch version, timing settings).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from kforge_search.evaluator.result import Baseline, TimingStats


def baseline_key(*parts: object) -> str:
    return "|".join(str(p) for p in parts)


class BaselineCache:
    def __init__(self, path: Path):
        self.path = path

    def _load(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str, kind: str) -> Baseline | None:
        entry = self._load().get(key, {}).get(kind)
        if entry is None:
            return None
        timing = TimingStats(**entry["timing"]) if entry.get("timing") else None
        return Baseline(kind, entry["ok"], timing, entry.get("error", ""), cached=True)

    def put(self, key: str, baseline: Baseline) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # writers take turns, so none loses another's entry between its load and its write
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            data.setdefault(key, {})[baseline.kind] = asdict(replace(baseline, cached=False))
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)  # atomic: readers never see a half-written file
