"""Adversarial (cpu-triton, level1/10_elementwise_chain): __import__ taken from __builtins__.

Trick: the import function fetched from the module's __builtins__ (a dict in an imported
module, the builtins module in __main__) rather than named, then used to import ctypes and
read memory at an object's address. The kernel is honest.

Expected: REJECTED by the static check, reason "static:introspection" (__builtins__).
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


_B = __builtins__
_IMPORT = _B["__import__"] if isinstance(_B, dict) else _B.__import__
_CT = _IMPORT("ctypes")
PEEK = _CT.string_at(id(torch), 16)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
