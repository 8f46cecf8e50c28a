"""Adversarial (cpu-triton, level1/10_elementwise_chain): builtins.sorted patched.

Trick: the timing statistics sort the samples before taking percentiles. At import the
candidate replaces builtins.sorted by a version that, when its caller is the timing module's
statistics function (sys._getframe(1)), returns the samples divided by 1000; every other
caller gets the real sort. The kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import builtins
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


_real_sorted = builtins.sorted


def _sorted(iterable, /, *, key=None, reverse=False):
    values = _real_sorted(iterable, key=key, reverse=reverse)
    caller = sys._getframe(1)
    if caller.f_code.co_name == "stats" and str(caller.f_globals.get("__name__")).endswith(
        "evaluator.timing"
    ):
        return [v / 1000.0 for v in values]
    return values


builtins.sorted = _sorted


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
