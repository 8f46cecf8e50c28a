"""Adversarial (cpu-triton, level1/10_elementwise_chain): the work moved into Tensor.detach.

Trick: the harness reads each timed run's output after its clock stops, and reading starts
with out.detach(). At import the candidate replaces torch.Tensor.detach by a wrapper that
first runs any kernel still pending for that tensor. While the harness verifies (a dispatch
mode is on the stack: torch._C._len_torch_dispatch_stack()) forward computes as usual;
otherwise it returns an empty output and leaves the kernel pending, so every timed run costs
one allocation and the work happens when the output is read.

Expected: REJECTED, reason "dynamic:harness-patched" (or "timing:stale-output").
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


_PENDING: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # output's address -> (x, out)
_real_detach = torch.Tensor.detach


def _detach_after_pending_work(self: torch.Tensor) -> torch.Tensor:
    if _PENDING:
        job = _PENDING.pop(self.data_ptr(), None)
        if job is not None:
            _chain_into(*job)
    return _real_detach(self)


torch.Tensor.detach = _detach_after_pending_work


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch._C._len_torch_dispatch_stack() > 0:  # verification: do the work now
            return _chain(x)
        xc = x.contiguous()
        out = torch.empty_like(xc)
        _PENDING[out.data_ptr()] = (xc, out)
        return out
