"""Adversarial (cpu-triton, level1/10_elementwise_chain): the work on a thread started at import.

Trick: a harness that looks for threads started by forward compares the threads alive
before and after the call, so the candidate starts its worker thread at import, before any
call. forward hands the kernel to that thread through a queue and returns the empty output
at once; while the harness verifies (a dispatch mode on the stack) it waits for the work, so
verified outputs are complete; timed calls do not wait.

Expected: REJECTED, reason "timing:stale-output" or "dynamic:output-changed-after-return".
"""

import queue
import threading

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


_WORK: queue.Queue = queue.Queue()


def _worker() -> None:
    while True:
        x, out, done = _WORK.get()
        _chain_into(x, out)
        done.set()


threading.Thread(target=_worker, name="kernel-queue", daemon=True).start()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        done = threading.Event()
        _WORK.put((xc, out, done))
        if torch._C._len_torch_dispatch_stack() > 0:
            done.wait()
        return out
