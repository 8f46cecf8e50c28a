"""Adversarial (cpu-triton, level1/10_elementwise_chain): the captured clock swapped in place.

Trick: the harness captures its clocks (a frozen dataclass, timing.Clocks) before the
candidate is imported, so rebinding time.perf_counter has no effect. At import the candidate
finds that Clocks object with gc.get_objects() and writes a clock that runs 1000 times slower
into it with object.__setattr__, which a frozen dataclass does not stop: every timed run then
measures a thousandth of its duration. The kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import gc
import time

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


_real_clock = time.perf_counter
_epoch = _real_clock()


def _slow_clock() -> float:
    return _epoch + (_real_clock() - _epoch) / 1000.0


def _slow_down_captured_clocks() -> None:
    for obj in gc.get_objects():
        kind = type(obj)
        if kind.__name__ == "Clocks" and kind.__module__.endswith("evaluator.timing"):
            object.__setattr__(obj, "perf_counter", _slow_clock)


_slow_down_captured_clocks()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
