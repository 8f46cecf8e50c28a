"""Adversarial (cpu-triton, level1/10_elementwise_chain): work the in-process timing never
sees.

Trick: the timed runs refresh their inputs in place, in the same buffers, so the address of
the input stays the same from run to run. This candidate does its real, slow part only when
its input arrives in a buffer it has not seen before (here: busy Python arithmetic, a
stand-in for work moved out of the timed region), which in the timed runs happens once, and
is cheap otherwise. The timed runs claim a cheap call; a real workload, which brings new
buffers, pays the slow part on every call.

Expected: REJECTED with reason "timing:wall-clock": the evaluator times back-to-back calls,
each on inputs of its own, with its own clock, and the calls take far longer than the timed
runs claim.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
SLOW_STEPS = 12_000_000  # ~0.2 s of Python


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen: set[int] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.data_ptr() not in self.seen:
            self.seen.add(x.data_ptr())
            self.spent = sum(range(SLOW_STEPS))
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
