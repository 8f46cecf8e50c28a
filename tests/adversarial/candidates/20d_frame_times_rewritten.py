"""Adversarial (cpu-triton, level1/10_elementwise_chain): the timer's samples shrunk in place.

Trick: forward walks up the stack with sys._getframe() and looks for the timing loop's list
of samples (a local named "times", or "host", holding floats). A list is shared, not copied,
by f_locals, so the candidate divides every sample already recorded by 1000, in place: each
timed run shrinks the runs before it, and the statistics see runs 1000 times shorter. The
kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched" (or a reason of its own for tampering
with the timed samples).
"""

import sys

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


_SHRUNK: dict[int, int] = {}  # id of a samples list -> how many of its entries are shrunk


def _shrink_recorded_times() -> None:
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("times", "host"):
            samples = frame.f_locals.get(name)
            if isinstance(samples, list) and all(isinstance(v, float) for v in samples):
                done = _SHRUNK.get(id(samples), 0)
                for i in range(done, len(samples)):
                    samples[i] /= 1000.0
                _SHRUNK[id(samples)] = len(samples)
        frame = frame.f_back


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _shrink_recorded_times()
        return _chain(x)
