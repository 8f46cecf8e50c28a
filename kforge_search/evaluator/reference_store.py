"""References on disk, shared by the evaluators of a node: computed once per (problem,
sizes, device, seed, trials, torch, harness), read by every other evaluator.

An evaluator keeps its references in memory (pipeline.Evaluator.reference); several
evaluators on one node (evaluator actors sharing a GPU) each computed every problem's
reference and its unseen sizes' again: on the H100 a published-size level-2 reference took
10-30 s, ahead of every actor's first candidate of the problem. Here the first evaluator to
need one computes it while holding the key's lock; the others wait for it and read the file.

Each reference is sealed with the evaluators' key (cache_seal.py): one written or changed by
anything else (a candidate's child may not write here: landlock.py) is not used. Its tensors
are the file its child wrote (tensorfile.py), renamed here (where the temporary folder
is on this file system; else written from the parent's copy), its other fields a small
file of their own; both are hashed as they are read,
the seal covers exactly the bytes used, and the tensors are views of them. On level2/16 at
its published size (1.7 GiB of outputs and float64 copies; the 2-CPU machine, scripts/
profile_reference.py) the parent took 7.6-14 s to store a reference through torch.save and
a second pass to hash it, 7.8 s to read one back; now reading the child's file and renaming
it take the first evaluator 1.6-1.9 s, reading the stored one the others 2.6-2.9 s. A streamed
reference (footprint.streamed: too large to hold) is not stored. The key holds a hash of the
evaluator's own sources: a changed harness computes its references anew.
"""

from __future__ import annotations

import contextlib
import errno
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
# a stored reference's files: its child's file of its tensors (tensorfile.py), the rest of
# it (a tensorfile without tensors), the seal over both
SUFFIXES = (".pt", ".meta", ".seal")


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
        name = self._name(key)
        try:
            sealed = (self.folder / f"{name}.seal").read_text().strip()
            meta = tensorfile.read(self.folder / f"{name}.meta", hashed=True)
            tensors = tensorfile.read(self.folder / f"{name}.pt", hashed=True)
        except OSError:
            return None
        if not hmac.compare_digest(self._seal(key, tensors.digest + meta.digest), sealed):
            return None
        try:  # what was hashed is what is used: its tensors are views of the bytes read
            saved, held = tensorfile.parse(meta.data), tensorfile.parse(tensors.data)
            numerics = Numerics(**saved["numerics"], exact=held["exact"])
        except Exception:
            return None
        footprint = saved.get("footprint")
        return {
            **saved,
            "outputs": held["outputs"],
            "buffers": held["buffers"],
            "warnings": tuple(saved["warnings"]),
            "per_call_ms": float(saved["per_call_ms"]),
            "numerics": numerics,
            "footprint": Footprint.from_dict(footprint) if footprint else None,
        }

    def save(self, key: str, reference: Any, saved: tensorfile.Read) -> bool:
        """Stores the reference (not a streamed one, nor one over ONE_MAX_BYTES); whether it
        did (not where the disk refused it). `saved`: its child's file of its tensors as
        the parent read and hashed it (reference.reference_of), which becomes the stored
        one: renamed, where it is on this file system, else written from the bytes read.
        The folder keeps at most ALL_MAX_BYTES: the least recently stored go first."""
        if reference.streamed is not None or reference.held_bytes > ONE_MAX_BYTES:
            return False
        numerics = {f.name: getattr(reference.numerics, f.name) for f in fields(Numerics)}
        del numerics["exact"]  # in the child's file
        meta = {
            "warnings": list(reference.warnings),
            "device_name": reference.device_name,
            "torch_version": reference.torch_version,
            "per_call_ms": reference.per_call_ms,
            "numerics": numerics,
            "footprint": reference.footprint.as_dict() if reference.footprint else None,
        }
        name = self._name(key)
        parts = [self.folder / f"{name}{suffix}.{os.getpid()}" for suffix in SUFFIXES]
        try:
            _place(saved, parts[0])
            digest = saved.digest + tensorfile.write(meta, parts[1], hashed=True)
            parts[2].write_text(self._seal(key, digest))
            for part in parts:  # the seal last: a reader finds all three (or a bad seal)
                os.replace(part, part.with_suffix(""))
        except OSError:
            return False
        finally:
            for part in parts:
                part.unlink(missing_ok=True)
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
            for suffix in SUFFIXES:
                path.with_suffix(suffix).unlink(missing_ok=True)
            total -= size

    def _seal(self, key: str, digest: bytes) -> str:
        """The seal of `key`'s reference whose files' SHA-256 (tensorfile: taken as they
        are written or read), one after the other, are `digest`."""
        text = f"{self._name(key)}\0".encode() + digest
        return hmac.new(self._key, text, hashlib.sha256).hexdigest()


def _place(saved: tensorfile.Read, path: Path) -> None:
    """The child's file at `path`: renamed, or, from another file system, written from the
    bytes the parent read (and hashed) of it."""
    try:
        os.replace(saved.path, path)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open(path, "wb") as f:
            f.write(memoryview(saved.data.numpy()))


# references an evaluator keeps in memory, newest first: a search's evaluator actors each
# evaluate every problem's candidates (8 problems, their unseen sizes: 16), and at 4 each
# evaluation read its reference back from the node's store (H100, 8 actors: 0.9 s of 12.9)
REFERENCES_KEPT = 16


def references_to_drop(sizes: list[int], budget: float, most: int = REFERENCES_KEPT) -> int:
    """How many of the oldest cached references go (`sizes`: their bytes, oldest first):
    at most `most` stay, and beside the two newest (a problem's and its unseen sizes') no
    more than `budget` bytes (its share of the machine: a large problem's reference goes)."""
    held, drop = sum(sizes), 0
    while len(sizes) - drop > most or (len(sizes) - drop > 2 and held > budget):
        held -= sizes[drop]
        drop += 1
    return drop
