"""Adversarial (cpu-triton, level1/10_elementwise_chain): the integrity check switched off.

Trick: at import, the candidate replaces guards.Integrity.changed (a class attribute: the
method that compares the identities of the harness's functions with those taken before the
candidate was imported) by one that reports nothing, and then does what 07b does: it replaces
the timing module's statistics helper by a fake that divides every time by 1000. The kernel
itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
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


def _patch_harness() -> None:
    try:
        from kforge_search.evaluator import guards, timing
    except ImportError:
        return
    guards.Integrity.changed = lambda self: []
    real_stats = timing.stats

    def fast_stats(method, times_ms, host_ms=None):
        return real_stats(method, [t / 1000.0 for t in times_ms], host_ms)

    timing.stats = fast_stats


_patch_harness()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
