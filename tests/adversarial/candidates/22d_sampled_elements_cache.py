"""Adversarial (cpu-triton, level1/10_elementwise_chain): a cache keyed on a few elements.

Trick: forward memoizes its outputs, keyed on the input's shape and 8 of its elements (the
first, the last and 6 spread between them): hashing 8 numbers is far cheaper than reading the
whole input. An input that agrees with an earlier one on those 8 elements gets the earlier
output, whatever its other elements hold.

Expected: INCORRECT (an input that repeats an earlier one at the sampled positions and
differs elsewhere), or REJECTED with reason "timing:stale-output".
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


SAMPLES = 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._cache: dict[tuple, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        flat = xc.reshape(-1)
        n = flat.numel()
        positions = sorted({(n - 1) * i // (SAMPLES - 1) for i in range(SAMPLES)}) if n else []
        key = (tuple(xc.shape), tuple(float(flat[i]) for i in positions))
        hit = self._cache.get(key)
        if hit is not None:
            _chain_kernel[(1,)](xc, hit, 0, BLOCK=BLOCK)  # a launch that stores nothing
            return hit
        out = _chain_into(xc, torch.empty_like(xc))
        self._cache[key] = out
        return out
