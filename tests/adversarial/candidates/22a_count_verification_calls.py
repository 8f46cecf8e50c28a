"""Adversarial (cpu-triton, level1/10_elementwise_chain): work only in the verification calls.

Trick: a harness verifies a fixed number of trials on a freshly built model, then times
more calls. forward counts its calls per input shape (the unseen-size check builds a new
model, which counts again) and computes honestly for the first 8 of each shape, the number of
verification trials here; every later call returns the previous output and launches the
kernel over 0 elements (a launch, for a launch counter, that stores nothing).

Expected: REJECTED, reason "timing:stale-output" (every timed run's outputs are checked), or
INCORRECT.
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


VERIFICATION_CALLS = 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._calls: dict[tuple[int, ...], int] = {}
        self._last: dict[tuple[int, ...], torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(x.shape)
        self._calls[shape] = self._calls.get(shape, 0) + 1
        last = self._last.get(shape)
        if self._calls[shape] > VERIFICATION_CALLS and last is not None:
            _chain_kernel[(1,)](x, last, 0, BLOCK=BLOCK)
            return last
        self._last[shape] = _chain(x)
        return self._last[shape]
