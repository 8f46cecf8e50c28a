"""Adversarial (cpu-triton, level1/10_elementwise_chain): the job's seed read from a frame.

Trick: at import, the candidate walks the stack with inspect.stack() and reads the harness's
locals (f_locals) until it finds the worker's `job`: its seed decides every trial's inputs,
so a candidate that knows it can compute the answers ahead of time. Here it only keeps the
seed; the kernel itself is honest.

Expected: REJECTED by the static check, reasons "static:import" (inspect) and
"static:introspection" (f_locals).
"""

import inspect

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


def _find_seed() -> int | None:
    for info in inspect.stack():
        job = info.frame.f_locals.get("job")
        if job is not None and hasattr(job, "seed"):
            return int(job.seed)
    return None


SEED = _find_seed()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
