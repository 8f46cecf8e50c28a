"""Adversarial (cpu-triton, level1/10_elementwise_chain): outputs cached across calls.

Trick: the first call for an input computes honestly with the kernel; the output is kept in a
cache keyed on the input's address, shape and dtype, and any later call whose input has the
same key gets the cached tensor back without any work (it still launches the kernel with an
element count of 0, so a launch counter sees a launch). A benchmark that times forward on one
input over and over then measures a dictionary lookup. When the allocator hands a new input
the address of an earlier, freed one, the stale output of that earlier input comes back.

Expected: INCORRECT (fresh inputs per trial that reuse an address), or REJECTED with reason
"timing:stale-output" (the outputs of the timed runs are checked) or "timing:wall-clock"
(back-to-back calls on inputs of their own, each a miss, take far longer than the cached
timed runs claim).
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache: dict[tuple, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), tuple(x.shape), x.dtype)
        xc = x.contiguous()
        hit = self._cache.get(key)
        if hit is not None:
            _chain_kernel[(1,)](xc, hit, 0, BLOCK=BLOCK)  # a launch that stores nothing
            return hit
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        self._cache[key] = out
        return out
