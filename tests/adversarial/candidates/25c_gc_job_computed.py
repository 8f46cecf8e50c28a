"""Adversarial (cpu-triton, level1/10_elementwise_chain): the Job found by walking the heap.

Trick: at import, the candidate takes sys from torch (torch imports it: torch.sys) and gc from
sys.modules, both by names built at run time, and walks gc's objects for the worker's Job (it
has `seed` and `timing_seed`): with the seeds, the inputs of every trial and timed run can
be made ahead of time. The audit hook refuses gc.get_objects whatever name reached it. The
kernel itself is honest.

Expected: REJECTED, reason "sandbox:gc".
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


_SYS = getattr(torch, "s" + "ys")
_GC = _SYS.modules["g" + "c"]


def _find_job() -> object | None:
    for obj in getattr(_GC, "get_" + "objects")():
        if hasattr(obj, "timing_seed") and hasattr(obj, "seed"):
            return obj
    return None


JOB = _find_job()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
