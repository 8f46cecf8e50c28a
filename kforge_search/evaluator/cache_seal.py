"""A key only evaluator parents hold, and the seals it puts on what they cache on disk
(the baselines: baselines.py), so that a rewrite by anything else is detected.

The key lives in `<cache>/private/key` (folder 0700, file 0600), made once, atomically, by
the first evaluator that needs it. Candidates' children never read it: their file-system
sandbox leaves that folder out of what they may read (landlock.py). A seal is an HMAC-SHA256
over an entry's canonical JSON and its cache key; an entry whose seal does not match (edited,
replaced by a rename, written by an older kforge) is not used: it is measured again and
replaced, and the evaluator says so in the result's warnings.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

KEY_BYTES = 32


def private_dir(cache: Path) -> Path:
    """The folder candidates' children may neither read nor write (landlock.py)."""
    return cache / "private"


def load_key(cache: Path) -> bytes:
    """The evaluators' key, made on first use (racing makers: the first rename wins)."""
    folder = private_dir(cache)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / "key"
    with contextlib.suppress(FileNotFoundError):
        key = path.read_bytes()
        if len(key) == KEY_BYTES:
            return key
    fresh = folder / f"key.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(KEY_BYTES))
    try:
        os.link(fresh, path)  # fails if another maker was first: theirs stands
    except FileExistsError:
        pass
    finally:
        fresh.unlink(missing_ok=True)
    return path.read_bytes()


def seal(key: bytes, name: str, entry: dict[str, Any]) -> str:
    text = json.dumps([name, entry], sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def intact(key: bytes, name: str, entry: dict[str, Any], sealed: Any) -> bool:
    return isinstance(sealed, str) and hmac.compare_digest(seal(key, name, entry), sealed)
