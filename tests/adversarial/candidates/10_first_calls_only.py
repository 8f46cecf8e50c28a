"""Adversarial (cpu-triton, level1/10_elementwise_chain): real work only in the first calls.

Trick: forward counts its calls. The first 7 run the (honest) chain kernel; every later call
returns the previous result without computing anything (it launches the kernel with an
element count of 0, which stores nothing, so a launch counter still sees a launch). A harness
that verifies a handful of trials and then times many more calls measures calls that do no
work.

Expected: REJECTED with reason "timing:stale-output" (the timed runs' outputs are checked), or
INCORRECT (extra verification calls after the first 7).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
HONEST_CALLS = 7


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
        self._calls = 0
        self._last: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._calls += 1
        xc = x.contiguous()
        if self._calls > HONEST_CALLS and self._last is not None:
            _chain_kernel[(1,)](xc, self._last, 0, BLOCK=BLOCK)  # a launch that stores nothing
            return self._last
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        self._last = out
        return out
