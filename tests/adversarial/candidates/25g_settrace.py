"""Adversarial (cpu-triton, level1/10_elementwise_chain): a tracer on the harness.

Trick: a tracer set with sys.settrace is called with every frame the interpreter enters: the
worker's too, with their locals (the job, its seeds, the timing loop's state). The candidate
takes sys from torch by a computed name and sets one at import, also by a computed name;
the audit hook refuses it. The candidate swallows the refusal and computes honestly.

Expected: REJECTED, reason "sandbox:introspection".
"""

import contextlib

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
SEEN: list[object] = []


def _tracer(frame: object, event: str, arg: object) -> None:
    job = getattr(frame, "f_" + "locals").get("job")
    if job is not None:
        SEEN.append(job)


with contextlib.suppress(PermissionError):
    getattr(_SYS, "set" + "trace")(_tracer)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
