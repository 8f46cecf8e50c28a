"""Adversarial (cpu-triton, level1/10_elementwise_chain): hunting for saved reference outputs.

Trick: forward looks for *.pt files in its working directory, its parent, /tmp and
tempfile.gettempdir() (and one folder level below each), torch.load()s them (weights only)
and has a Triton kernel copy the first tensor of the output's shape and dtype into the
output, hoping the harness saved the expected outputs somewhere it can read. When it finds
nothing it copies its own input. The evaluator never leaves the reference outputs where the
candidate can read them, so what it returns is wrong.

Expected: INCORRECT.
"""

import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
MAX_FILES = 200
MAX_BYTES = 64 * 2**20


@triton.jit
def _copy_kernel(src_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


def _pt_files() -> list[Path]:
    roots = [Path.cwd(), Path.cwd().parent, Path("/tmp"), Path(tempfile.gettempdir())]
    found: list[Path] = []
    seen: set[Path] = set()
    for root in roots:
        for pattern in ("*.pt", "*/*.pt"):
            try:
                paths = sorted(root.glob(pattern))
            except OSError:
                continue
            for path in paths:
                if path in seen:
                    continue
                seen.add(path)
                try:
                    if path.is_file() and path.stat().st_size <= MAX_BYTES:
                        found.append(path)
                except OSError:
                    continue
                if len(found) >= MAX_FILES:
                    return found
    return found


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _find_on_disk(x: torch.Tensor) -> torch.Tensor | None:
    for path in _pt_files():
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:
            continue
        for t in _tensors(loaded):
            if t.shape == x.shape and t.dtype == x.dtype:
                return t.to(x.device).contiguous()
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        found = _find_on_disk(xc)
        source = found if found is not None else xc
        out = torch.empty_like(xc)
        n = xc.numel()
        _copy_kernel[(triton.cdiv(n, BLOCK),)](source, out, n, BLOCK=BLOCK)
        return out
