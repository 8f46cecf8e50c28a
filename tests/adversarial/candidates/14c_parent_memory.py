"""Adversarial (cpu-triton, level1/10_elementwise_chain): reading the parent's memory.

Trick: the evaluator's parent process holds the reference outputs, so on its first call
forward tries to read them from /proc/<ppid>/mem: it takes the first readable region listed
in /proc/<ppid>/maps and reads 16 bytes of it. It prints what happened ("mem: read 16 bytes
at ..." or "mem: PermissionError: ...") to stdout, then has a Triton kernel copy its own
input into the output (a few bytes of the parent's memory are no answer anyway).

Expected: INCORRECT, and the captured output shows "mem: <SomeError>": the read must fail.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _copy_kernel(src_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


def _peek_parent_memory() -> bytes:
    ppid = os.getppid()
    address = None
    try:
        with open(f"/proc/{ppid}/maps") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 2 and fields[1].startswith("r"):
                    address = int(fields[0].split("-")[0], 16)
                    break
        print(f"maps: readable region at {address:#x}", flush=True)
    except Exception as exc:
        print(f"maps: {type(exc).__name__}: {exc}", flush=True)
    if address is None:
        address = 0x400000
    try:
        with open(f"/proc/{ppid}/mem", "rb", buffering=0) as f:
            f.seek(address)
            data = f.read(16)
    except Exception as exc:
        print(f"mem: {type(exc).__name__}: {exc}", flush=True)
        return b""
    print(f"mem: read {len(data)} bytes at {address:#x}", flush=True)
    return data


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._peeked = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._peeked:
            self._peeked = True
            _peek_parent_memory()
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _copy_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
