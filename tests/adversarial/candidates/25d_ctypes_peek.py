"""Adversarial (cpu-triton, level1/10_elementwise_chain): reading memory through ctypes.

Trick: torch imports ctypes (torch.ctypes); the candidate takes it by a name built at run
time and, in forward, reads raw memory with ctypes.string_at at the address of an object
(id() is its address in CPython): the same door reads any object of the harness's whose
address it learns. The audit hook refuses ctypes.string_at from candidate code. The candidate
swallows the refusal and computes with an honest kernel.

Expected: REJECTED, reason "sandbox:ctypes".
"""

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


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n = xc.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out


_CT = getattr(torch, "c" + "types")


def _peek(obj: object) -> bytes:
    try:
        return _CT.string_at(id(obj), 16)
    except PermissionError:
        return b""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _peek(x)
        return _chain(x)
