"""Tensors in nested lists, tuples and dicts, as one file that is read back without a copy:
a reference's outputs, float64 copies and changed buffers, from its child to the parent and
in the node's reference store (reference_store.py).

The file: MAGIC, the skeleton's length, the skeleton (the object torch.save'd, each tensor
in it a meta tensor of its shape, strides and dtype), then each tensor's bytes in memory
order, each at an ALIGN-byte offset. It is read into one buffer and each tensor is a view
of it; the store's files are hashed (SHA-256) as they are written and read, on a thread
beside the I/O, so the seal covers exactly the bytes used with no second pass over them.
A level-2 reference of 1.7 GiB (level2/16 at its published size) took its evaluator's parent
~14 s to store through torch.save into memory (8.7 s of it: the zip writer) and 7.8 s to
read back (torch.load copies every tensor out of the bytes it read).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"kforge-tensors-1"
ALIGN = 64  # each tensor's offset: a view of any dtype is aligned
CHUNK = 8 << 20  # bytes read, written and hashed at a time


class _Hasher:
    """SHA-256 of successive chunks, taken in order on a thread of its own (hashlib lets
    go of the GIL), beside the reads or writes of the next ones; `on`: False takes none."""

    def __init__(self, on: bool):
        self._sha = hashlib.sha256() if on else None
        self._pool = ThreadPoolExecutor(1) if on else None

    def add(self, chunk: memoryview) -> None:
        if self._pool is not None:
            self._pool.submit(self._sha.update, chunk)  # type: ignore[union-attr]

    def digest(self) -> bytes:
        if self._pool is None or self._sha is None:
            return b""
        self._pool.shutdown(wait=True)
        return self._sha.digest()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _dense(t: Any) -> Any:
    """`t`'s elements in memory order as a 1-D view, where they fill a block of its storage
    (in any order of its dims: a transposed output too); else None."""
    expected = 1
    for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        if stride != expected:
            return None
        expected *= size
    return t.as_strided((t.numel(),), (1,))


def _skeleton(value: Any, tensors: list[Any]) -> Any:
    """`value` with each tensor a meta tensor of its shape, strides and dtype; the tensors,
    in that order, each on the CPU and laid out as its meta tensor says, go to `tensors`."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        if _dense(t) is None:  # overlapping or with gaps: saved contiguous
            t = t.contiguous()
        tensors.append(t)
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    if isinstance(value, dict):
        return {k: _skeleton(v, tensors) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_skeleton(v, tensors) for v in value)
    return value


def _parts(head: bytes, tensors: list[Any]) -> Iterator[memoryview]:
    """The file's bytes, in chunks of at most CHUNK."""
    import torch

    yield memoryview(MAGIC + len(head).to_bytes(8, "little") + head)
    offset = len(MAGIC) + 8 + len(head)
    for t in tensors:
        if t.numel() == 0:  # no bytes: parse makes it anew
            continue
        if (pad := _aligned(offset) - offset) > 0:
            yield memoryview(bytes(pad))
            offset += pad
        raw = memoryview(_dense(t).view(torch.uint8).numpy())  # type: ignore[union-attr]
        for start in range(0, len(raw), CHUNK):
            yield raw[start : start + CHUNK]
        offset += len(raw)


def write(value: Any, path: Path, hashed: bool = False) -> bytes:
    """Saves `value` (tensors, in lists, tuples and dicts, beside what torch.load's
    weights_only reads) to `path`; with `hashed`, the file's SHA-256 (else b"")."""
    import torch

    tensors: list[Any] = []
    head = io.BytesIO()
    torch.save(_skeleton(value, tensors), head)
    hasher = _Hasher(hashed)
    try:
        with open(path, "wb") as f:  # buffered: a chunk is written whole
            for part in _parts(head.getvalue(), tensors):
                hasher.add(part)
                f.write(part)
        return hasher.digest()
    finally:
        hasher.close()


@dataclass(frozen=True)
class Read:
    """A file as `read` read it."""

    path: Path
    data: Any  # its bytes, one uint8 tensor (parse: the tensors are views of it)
    digest: bytes  # their SHA-256, taken as they were read (b"": not hashed)


def read(path: Path, hashed: bool = False) -> Read:
    """`path`'s bytes, with `hashed` their SHA-256. OSError where the file changes length
    while it is read."""
    import torch

    hasher = _Hasher(hashed)
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            data = torch.empty(size, dtype=torch.uint8)
            view = memoryview(data.numpy())
            done = 0
            while done < size:
                n = f.readinto(view[done : done + CHUNK])
                if not n:
                    raise OSError(f"{path} shrank while it was read")
                hasher.add(view[done : done + n])
                done += n
            if f.read(1):
                raise OSError(f"{path} grew while it was read")
        return Read(path, data, hasher.digest())
    finally:
        hasher.close()


def parse(data: Any) -> Any:
    """The value a file of `write` holds, from its bytes (`read`): each tensor a view of
    `data`'s memory, a storage of its own (torch.save of some of them saves theirs alone,
    and refuses views of one storage as different dtypes). ValueError where they are not
    such a file."""
    import torch

    buffer = data.numpy()  # what the tensors' storages hold on to
    raw = memoryview(buffer)
    start = len(MAGIC) + 8
    if len(raw) < start or bytes(raw[: len(MAGIC)]) != MAGIC:
        raise ValueError("not a tensor file")
    end = start + int.from_bytes(raw[len(MAGIC) : start], "little")
    if end > len(raw):
        raise ValueError("a tensor file cut short in its skeleton")
    skeleton = torch.load(io.BytesIO(raw[start:end]), weights_only=True)
    offset = [end]

    def rebuilt(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.numel() == 0:
                return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
            first = _aligned(offset[0])
            size = value.numel() * value.element_size()
            if first + size > len(raw):
                raise ValueError("a tensor file cut short in its tensors")
            offset[0] = first + size
            flat = torch.frombuffer(buffer, dtype=value.dtype, count=value.numel(), offset=first)
            return flat.as_strided(value.shape, value.stride())
        if isinstance(value, dict):
            return {k: rebuilt(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(rebuilt(v) for v in value)
        return value

    value = rebuilt(skeleton)
    if offset[0] != len(raw):
        raise ValueError("a tensor file with bytes past its tensors")
    return value


def load(path: Path) -> Any:
    """The value `write` saved to `path`."""
    return parse(read(path).data)
