"""Adversarial (cpu-triton, level1/10_elementwise_chain): a lazy tensor only in timed runs.

Trick: a harness checks that verified outputs are plain tensors. In calls nobody watches (no
dispatch mode on the stack: the timed runs) forward returns a torch.Tensor subclass instead,
an empty buffer whose __torch_function__ runs the pending kernel the first time anything
reads the tensor (detach, reshape, indexing): the work happens when the harness reads the
output, after the timer stopped. Verified calls return plain, computed tensors.

Expected: REJECTED, reason "dynamic:output-type" or "timing:stale-output".
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


class _Deferred(torch.Tensor):
    """Its data is the output's buffer; the kernel that fills it runs at the first read."""

    _source: torch.Tensor | None = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in args:
            source = getattr(arg, "_source", None) if isinstance(arg, _Deferred) else None
            if source is not None:
                arg._source = None
                _chain_into(source, arg.as_subclass(torch.Tensor))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch._C._len_torch_dispatch_stack() > 0:
            return _chain(x)
        xc = x.contiguous()
        out = torch.empty_like(xc).as_subclass(_Deferred)
        out._source = xc
        return out
