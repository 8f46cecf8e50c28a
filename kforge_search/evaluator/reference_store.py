"""References on disk, shared by the evaluators of a node: computed once per (problem,
sizes, device, seed, trials, torch, harness), read by every other evaluator.

An evaluator keeps its references in memory (pipeline.Evaluator.reference); several
evaluators on one node (evaluator actors sharing a GPU) each computed every problem's
reference and its unseen sizes' again: on the H100 a published-size level-2 reference took
10-30 s, ahead of every actor's first candidate of the problem. Here the first evaluator to
need one computes it while holding the key's lock; the others wait for it and read the file.

Each file is sealed with the evaluators' key (cache_seal.py): one written or changed by
anything else (a candidate's child may not write here: landlock.py) is not used. The file is
a tensorfile (tensorfile.py): hashed as it is written and as it is read, its tensors views
of the bytes read, the seal over exactly those bytes. A streamed
reference (footprint.streamed: too large to hold) is not stored. The key holds a hash of the
evaluator's own sources: a changed harness computes its references anew.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
from collections.abc import Iterator
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from kforge_search.evaluator import cache_seal, tensorfile
from kforge_search.evaluator.exact import Numerics
from kforge_search.evaluator.footprint import Footprint

ONE_MAX_BYTES = 2 * 2**30  # a reference larger than this is computed by each evaluator
ALL_MAX_BYTES = 16 * 2**30  # the folder's most


@lru_cache(maxsize=1)
def harness_version() -> str:
    """A hash of the evaluator's sources: what decides a reference's outputs."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class ReferenceStore:
    """The node's references in `folder`, sealed with the key kept in `cache`."""

    def __init__(self, folder: Path, cache: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._key = cache_seal.load_key(cache)

    def _name(self, key: str) -> str:
        full = f"{key}|{harness_version()}"
        return hashlib.sha256(full.encode()).hexdigest()[:32]

    @contextlib.contextmanager
    def computing(self, key: str) -> Iterator[None]:
        """Held while this evaluator looks up, or computes and stores, the key's reference:
        another evaluator of the node that needs it waits, then reads what this one stored."""
        fd = os.open(self.folder / f"{self._name(key)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored reference's fields (a reference.Reference's, as `save` took them), or
        None: none stored, or its seal does not match."""
        path = self.folder / f"{self._name(key)}.pt"
        try:
            sealed = (self.folder / f"{self._name(key)}.seal").read_text().strip()
            data, digest = tensorfile.read(path, hashed=True)  # what it hashed is used
        except OSError:
            return None
        if not hmac.compare_digest(self._seal(key, digest), sealed):
            return None
        try:
            saved = tensorfile.parse(data)
        except Exception:
            return None
        numerics = Numerics(**saved["numerics"])
        footprint = saved.get("footprint")
        return {
            **saved,
            "warnings": tuple(saved["warnings"]),
            "per_call_ms": float(saved["per_call_ms"]),
            "numerics": numerics,
            "footprint": Footprint.from_dict(footprint) if footprint else None,
        }

    def save(self, key: str, reference: Any) -> bool:
        """Stores the reference (not a streamed one, nor one over ONE_MAX_BYTES); whether it
        did. The folder keeps at most ALL_MAX_BYTES: the least recently stored go first."""
        if reference.streamed is not None or reference.held_bytes > ONE_MAX_BYTES:
            return False
        numerics = {f.name: getattr(reference.numerics, f.name) for f in fields(Numerics)}
        saved = {
            "outputs": reference.outputs,
            "warnings": list(reference.warnings),
            "device_name": reference.device_name,
            "torch_version": reference.torch_version,
            "per_call_ms": reference.per_call_ms,
            "buffers": reference.buffers,
            "numerics": numerics,
            "footprint": reference.footprint.as_dict() if reference.footprint else None,
        }
        name = self._name(key)
        part = self.folder / f"{name}.pt.{os.getpid()}"
        try:
            digest = tensorfile.write(saved, part, hashed=True)
            os.replace(part, self.folder / f"{name}.pt")
        finally:
            part.unlink(missing_ok=True)
        seal = self.folder / f"{name}.seal.{os.getpid()}"
        seal.write_text(self._seal(key, digest))
        os.replace(seal, self.folder / f"{name}.seal")
        self._prune()
        return True

    def _prune(self) -> None:
        stored = []
        for path in self.folder.glob("*.pt"):
            with contextlib.suppress(OSError):
                stat = path.stat()
                stored.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in stored)
        for _, size, path in sorted(stored):
            if total <= ALL_MAX_BYTES:
                break
            path.unlink(missing_ok=True)
            path.with_suffix(".seal").unlink(missing_ok=True)
            total -= size

    def _seal(self, key: str, digest: bytes) -> str:
        """The seal of the file whose SHA-256 is `digest` (tensorfile: taken as it is
        written or read), as `key`'s reference."""
        text = f"{self._name(key)}\0".encode() + digest
        return hmac.new(self._key, text, hashlib.sha256).hexdigest()
