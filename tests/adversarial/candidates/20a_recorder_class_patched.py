"""Adversarial (cpu-triton, level1/10_elementwise_chain): the op recorder's class patched.

Trick: at import, the candidate imports the evaluator's guards module (it runs in the
evaluator's worker process, so the module is right there) and replaces OpRecorder.__new__, a
class attribute: every recorder the harness makes from then on is a dispatch mode that records
nothing, while the name guards.OpRecorder still points at the same class object. forward then
computes the chain with PyTorch operators and launches a token Triton kernel.

Expected: REJECTED, reason "dynamic:torch-fallback" or "dynamic:harness-patched".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._python_dispatch import TorchDispatchMode

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


class _Blind(TorchDispatchMode):
    """Looks like the harness's recorder (a mode with a `forbidden` dict) and sees nothing."""

    def __init__(self):
        super().__init__()
        self.forbidden: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _blind_recorder(cls, allowed=()):
    return _Blind()


def _patch_recorder() -> None:
    try:
        from kforge_search.evaluator import guards
    except ImportError:
        return
    guards.OpRecorder.__new__ = staticmethod(_blind_recorder)


_patch_recorder()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _chain(x.reshape(-1)[:BLOCK])  # a token launch, for a launch counter
        return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1
