"""Adversarial (cpu-triton, level1/10_elementwise_chain): the op recorder's class rewired.

Trick: the candidate runs in the evaluator's worker, so the evaluator's modules are in
sys.modules; it reaches them through torch.sys by computed names (no import, nothing the
static check knows) and replaces guards.OpRecorder.__new__ with one that returns a context
that records nothing: the name OpRecorder still points at the same class, and CPython audits
no assignment of a plain class attribute. forward then computes the chain with PyTorch
operators and launches a token Triton kernel.

Expected: REJECTED, reason "dynamic:harness-patched" (the seal of the harness's classes).
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


class _Deaf:
    def __init__(self) -> None:
        self.forbidden: dict[str, int] = {}

    def __enter__(self) -> "_Deaf":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


def _deafen() -> None:
    guards = _SYS.modules.get("kforge_search.evaluator.guards")
    if guards is not None:
        guards.OpRecorder.__new__ = staticmethod(lambda cls, *a, **k: _Deaf())


_deafen()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _chain(x)  # a launch for the launch counter
        return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1
