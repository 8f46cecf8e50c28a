"""Replies on disk keyed by prompt hash: a rerun with the cache on gets the same replies
without calling the model (reproducible searches; cheap tests of prompt changes)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from kforge_search.llm.config import Reply


class ReplyCache:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Reply | None:
        try:
            data = json.loads(self._path(key).read_text())
            return replace(Reply(**data), cached=True, latency_s=0.0, cost_usd=0.0)
        except (OSError, ValueError, TypeError):
            return None

    def put(self, reply: Reply) -> None:
        path = self._path(reply.prompt_hash)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(reply), f)
        os.replace(tmp, path)  # whole files only: a crash leaves no torn reply
