"""Adversarial (cpu-triton, level1/10_elementwise_chain): a harness function's code swapped.

Trick: the harness checks the identity of its functions after each stage; a function whose
__code__ is replaced keeps its identity. At import the candidate reaches the harness's
modules (the running __main__, and model_run.py, where same_values lives) through torch.sys
by computed names and gives same_values (the comparison behind the input-mutation and
output-changed checks) the code of a function that always answers True.
Its forward then uses the input as scratch after computing the output (04b's trick), which
the swapped comparison would no longer see. The audit hook refuses the assignment (CPython
audits a function's __code__ being set) and the candidate swallows the refusal.

Expected: REJECTED, reason "sandbox:patch".
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


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n = xc.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out


_SYS = getattr(torch, "s" + "ys")
_CODE = "__co" + "de__"


@triton.jit
def _scratch_kernel(x_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(x_ptr + offs, x * 1.5 + 0.25, mask=mask)


def _always_same(a: object, b: object) -> bool:
    return True


def _swap() -> int:
    swapped = 0
    for name in ("__main__", "kforge_search.evaluator.worker", "kforge_search.evaluator.model_run"):
        target = getattr(_SYS.modules.get(name), "same_values", None)
        if target is None:
            continue
        try:
            setattr(target, _CODE, getattr(_always_same, _CODE))
            swapped += 1
        except PermissionError:
            pass
    return swapped


SWAPPED = _swap()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _chain(x)
        n = x.numel()
        _scratch_kernel[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK)  # x is now scratch
        return out
