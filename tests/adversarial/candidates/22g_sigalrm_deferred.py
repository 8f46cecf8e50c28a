"""Adversarial (cpu-triton, level1/10_elementwise_chain): the work in a SIGALRM handler.

Trick: Python runs signal handlers in the main thread, between bytecodes, whenever the
signal arrives. In calls nobody watches (no dispatch mode on the stack) forward returns an
empty output at once and arms a 50-microsecond timer (signal.setitimer) whose SIGALRM handler
runs the pending kernel: after forward has returned, and after a timer around it stopped.
Verified calls compute as usual. No thread, no process, nothing patched.

Expected: REJECTED, reason "timing:stale-output" (outputs are read right after each timed
run, before the handler is likely to have run).
"""

import signal

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


_PENDING: list[tuple[torch.Tensor, torch.Tensor]] = []


def _run_pending(signum, frame) -> None:
    while _PENDING:
        _chain_into(*_PENDING.pop())


signal.signal(signal.SIGALRM, _run_pending)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _run_pending(signal.SIGALRM, None)  # whatever an earlier timer left
        if torch._C._len_torch_dispatch_stack() > 0:
            return _chain(x)
        xc = x.contiguous()
        out = torch.empty_like(xc)
        _PENDING.append((xc, out))
        signal.setitimer(signal.ITIMER_REAL, 50e-6)
        return out
