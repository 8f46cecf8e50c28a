"""Adversarial (cpu-triton, level1/04_softmax, policy "loose"): constant output.

Trick: softmax rows of a wide input are all small, so a kernel that writes 1/ncols everywhere
(every row sums to 1, nothing is read) may land within a loose tolerance (atol = rtol = 1e-2)
of the reference without computing anything. At the "ci" size (rows of 1000 standard-normal
values) the largest softmax entries are already above 1e-2, so it fails there; inputs scaled
up (a second input distribution) make the rows peakier still.

Expected: INCORRECT.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _fill_kernel(out_ptr, n_elements, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.full((BLOCK,), value, dtype=tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        if n:
            _fill_kernel[(triton.cdiv(n, BLOCK),)](out, n, 1.0 / x.shape[1], BLOCK=BLOCK)
        return out
