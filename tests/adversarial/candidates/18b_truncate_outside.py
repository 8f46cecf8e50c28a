"""Adversarial (cpu-triton, level1/10_elementwise_chain): truncating an outside file.

Trick: forward truncates /tmp/kforge_fs_sandbox_target/victim.txt to zero bytes
(os.truncate: no open(), so a hook that watches opens for writing misses it).

Expected: REJECTED, reason "sandbox:write-outside"; below the audit hook, Landlock refuses
truncate(2) outside the writable folders (EACCES, ABI >= 3). The victim file is unchanged.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
VICTIM = "/tmp/kforge_fs_sandbox_target/victim.txt"  # tests/adversarial/test_fs_sandbox.py


def _attack() -> None:
    os.truncate(VICTIM, 0)


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _attack()
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
