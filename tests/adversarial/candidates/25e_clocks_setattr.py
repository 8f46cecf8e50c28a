"""Adversarial (cpu-triton, level1/10_elementwise_chain): the captured clocks rewritten.

Trick: the harness times with clocks captured before the candidate is imported, in a frozen
dataclass (timing.Clocks). At import the candidate finds that object on the heap (gc, reached
through torch.sys by computed names) and writes a clock that runs 1000 times slower into it
with object.__setattr__, which a frozen dataclass does not stop and CPython does not audit.
Every timed run would then measure a thousandth of its duration. The kernel is honest.

Expected: REJECTED by the static check, reason "static:introspection" (object.__setattr__).
With the Python guards off (EvalConfig(python_guards=False): no static rules, no audit hook),
REJECTED "dynamic:harness-patched" by the seal, naming clocks.perf_counter.
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
_GC = _SYS.modules["g" + "c"]
_TIME = _SYS.modules["ti" + "me"]
_REAL = _TIME.perf_counter
_EPOCH = _REAL()


def _slow() -> float:
    return _EPOCH + (_REAL() - _EPOCH) / 1000.0


def _rewrite_clocks() -> int:
    rewritten = 0
    for obj in getattr(_GC, "get_" + "objects")():
        if type(obj).__name__ == "Clocks" and hasattr(obj, "perf_counter"):
            object.__setattr__(obj, "perf_counter", _slow)
            rewritten += 1
    return rewritten


REWRITTEN = _rewrite_clocks()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
