"""Adversarial (cuda-triton, level1/10_elementwise_chain): the captured event class swapped.

Trick: the harness captures torch.cuda.Event in its Clocks (a frozen dataclass) before the
candidate is imported, and checks that torch.cuda.Event and its methods keep their
identities. The candidate leaves torch alone: it finds the Clocks object with
gc.get_objects() and writes a subclass of torch.cuda.Event into it with object.__setattr__.
The subclass's elapsed_time divides by 1000 only the interval the timing loop records as the
run (its caller's local "start" is the event itself), so the host-side check that compares
wall clock with the events' own wait stays consistent. The kernel itself is honest.

GPU only: it needs CUDA events.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import gc
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


class _FastEvent(torch.cuda.Event):
    def elapsed_time(self, end_event):
        elapsed = super().elapsed_time(end_event)
        if sys._getframe(1).f_locals.get("start") is self:
            return elapsed / 1000.0
        return elapsed


def _swap_captured_event() -> None:
    for obj in gc.get_objects():
        kind = type(obj)
        if kind.__name__ == "Clocks" and kind.__module__.endswith("evaluator.timing"):
            object.__setattr__(obj, "event", _FastEvent)


_swap_captured_event()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
