"""Adversarial (cpu-triton, level1/10_elementwise_chain): forged baselines, sealed again.

Trick: an evaluator that seals its cached baselines (an HMAC of each entry under a key kept
in the cache folder) would ignore the forged entries of 21a-21c. So the candidate looks for
that key where the evaluator keeps it (<cache>/private/key), forges every baseline 1000 times
slower, seals each forged entry again with the key (HMAC-SHA256 over the entry's canonical
JSON and its name, as an evaluator would), and renames the result over baselines.json from
Triton's (writable) cache folder. Without a key to read, it forges without seals. The kernel
itself is honest.

Expected: REJECTED, reason "sandbox:write-outside" (or the forged entries are not used), and
no forged baseline is ever read.
"""

import hashlib
import json
import os
from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


def _chain_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The honest kernel: relu(x * 1.5 + 0.25) * 2.0 - 0.1 into out."""
    n = x.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    return _chain_into(xc, torch.empty_like(xc))


TIMES = ("p20_ms", "p50_ms", "p80_ms")


def _cache_root() -> Path | None:
    root = os.environ.get("KFORGE_CACHE_DIR")
    if root:
        return Path(root)
    triton_cache = os.environ.get("TRITON_CACHE_DIR")
    return Path(triton_cache).parent if triton_cache else None


def _hmac_sha256(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 from hashlib alone (RFC 2104)."""
    block = 64
    key = hashlib.sha256(key).digest() if len(key) > block else key.ljust(block, b"\0")
    inner = hashlib.sha256(bytes(k ^ 0x36 for k in key) + message).digest()
    return hashlib.sha256(bytes(k ^ 0x5C for k in key) + inner).hexdigest()


def _seal(key: bytes, name: str, entry: dict) -> str:
    text = json.dumps([name, entry], sort_keys=True, separators=(",", ":"), default=str)
    return _hmac_sha256(key, text.encode())


def _forged(text: str, key: bytes | None) -> str:
    data = json.loads(text)
    for cache_key, kinds in data.items():
        for kind, entry in kinds.items():
            timing = entry.get("timing") or {}
            for name in TIMES:
                if name in timing:
                    timing[name] *= 1000.0
            if key is not None:
                entry.pop("seal", None)
                entry["seal"] = _seal(key, f"{cache_key}|{kind}", entry)
    return json.dumps(data, indent=1)


def _forge_sealed_baselines() -> None:
    root = _cache_root()
    triton_cache = os.environ.get("TRITON_CACHE_DIR")
    if root is None or not triton_cache or not (root / "baselines.json").is_file():
        return
    try:
        key = (root / "private" / "key").read_bytes()
    except OSError:
        key = None
    staged = Path(triton_cache) / "kforge-sealed-baselines.json"
    try:
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(_forged((root / "baselines.json").read_text(), key))
        os.replace(staged, root / "baselines.json")
    except (OSError, ValueError):
        pass


_forge_sealed_baselines()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
