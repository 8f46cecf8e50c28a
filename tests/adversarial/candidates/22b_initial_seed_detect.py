"""Adversarial (cpu-triton, level1/10_elementwise_chain): verification told apart by its seed.

Trick: the harness seeds torch before it draws each trial's inputs, and torch.initial_seed()
returns that seed. Verification trials have small seeds (the configured seed plus the trial),
timed runs large ones (an offset of 100000). forward computes honestly when the seed is
small; on a large seed it returns the output of the previous call at once, after a launch
over 0 elements for a launch counter.

Expected: REJECTED, reason "timing:stale-output", or INCORRECT.
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


def _chain_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The honest kernel: relu(x * 1.5 + 0.25) * 2.0 - 0.1 into out."""
    n = x.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    return _chain_into(xc, torch.empty_like(xc))


TIMING_SEEDS = 100_000


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._last: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = self._last
        if torch.initial_seed() >= TIMING_SEEDS and last is not None and last.shape == x.shape:
            _chain_kernel[(1,)](x, last, 0, BLOCK=BLOCK)
            return last
        self._last = _chain(x)
        return self._last
