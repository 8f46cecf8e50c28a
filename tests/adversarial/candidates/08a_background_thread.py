"""Adversarial (cpu-triton, level1/10_elementwise_chain): work finished by a Python thread.

Trick: forward allocates the output, runs the (honest) chain kernel on the first row itself (so
a launch counter sees a kernel launched inside forward), and hands the remaining rows to a
threading.Thread that sleeps 20 ms and then runs the same kernel on them; forward returns at
once. A timer around forward sees almost nothing; the output is only complete some time after
forward has returned.

Expected: REJECTED, reason "dynamic:background-thread" or
"dynamic:output-changed-after-return".
"""

import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
DELAY_S = 0.02


@triton.jit
def _chain_kernel(x_ptr, out_ptr, start, n_elements, BLOCK: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


def _chain(xc: torch.Tensor, out: torch.Tensor, start: int, stop: int) -> None:
    if stop > start:
        _chain_kernel[(triton.cdiv(stop - start, BLOCK),)](xc, out, start, stop, BLOCK=BLOCK)


def _finish_later(xc: torch.Tensor, out: torch.Tensor, start: int) -> None:
    time.sleep(DELAY_S)
    _chain(xc, out, start, xc.numel())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        first_row = xc.shape[-1] if xc.dim() else xc.numel()
        _chain(xc, out, 0, min(first_row, xc.numel()))
        threading.Thread(target=_finish_later, args=(xc, out, first_row), daemon=True).start()
        return out
