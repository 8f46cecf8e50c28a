"""Adversarial (cpu-triton, level1/10_elementwise_chain): hunting for the answer in gc.

Trick: forward scans gc.get_objects() for any other tensor with the output's shape and dtype
(hoping the harness keeps the reference output, or an expected-values tensor, in the same
process) and has a Triton kernel copy the first one it finds into the output. Nothing it can
find in its own process is the reference (the evaluator computes the reference in another
process): what it finds is a copy of an input or an earlier output, and when it finds nothing
it copies its own input.

Expected: INCORRECT.
"""

import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _copy_kernel(src_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


def _find_in_gc(x: torch.Tensor) -> torch.Tensor | None:
    for obj in gc.get_objects():
        try:
            if (
                isinstance(obj, torch.Tensor)
                and obj is not x
                and obj.shape == x.shape
                and obj.dtype == x.dtype
                and obj.device == x.device
                and obj.is_contiguous()
                and obj.data_ptr() != x.data_ptr()
            ):
                return obj
        except Exception:  # dead weak proxies and other odd objects
            continue
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        found = _find_in_gc(xc)
        source = found if found is not None else xc
        out = torch.empty_like(xc)
        n = xc.numel()
        _copy_kernel[(triton.cdiv(n, BLOCK),)](source, out, n, BLOCK=BLOCK)
        return out
