"""Adversarial (cpu-triton, level1/10_elementwise_chain): each call's work done by the next.

Trick: in a loop of calls, work left over from one call can run at the start of the next:
the total is the same, but a timer around one call that returns early sees less when the
harness only looks at outputs at the end. While the harness verifies (a dispatch mode on the
stack) forward computes as usual; otherwise it first finishes the previous call's pending
kernel, then returns a new empty output and leaves its kernel pending.

Expected: REJECTED, reason "timing:stale-output" (each timed run's outputs are read right
after the run).
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._pending is not None:
            _chain_into(*self._pending)
            self._pending = None
        if torch._C._len_torch_dispatch_stack() > 0:
            return _chain(x)
        xc = x.contiguous()
        out = torch.empty_like(xc)
        self._pending = (xc.clone(), out)
        return out
