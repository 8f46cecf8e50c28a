"""Adversarial (cpu-triton, level1/10_elementwise_chain): renaming a file onto an outside one.

Trick: forward writes a forged file in its work folder (allowed) and renames it onto
/tmp/kforge_fs_sandbox_target/victim.txt (os.replace): a check of the rename's source alone
lets it through.

Expected: REJECTED, reason "sandbox:write-outside" (the audit hook checks both ends);
below it, Landlock refuses to create or replace a file outside (EACCES). The victim is
unchanged.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
VICTIM = "/tmp/kforge_fs_sandbox_target/victim.txt"  # tests/adversarial/test_fs_sandbox.py


def _attack() -> None:
    with open("forged.txt", "w") as f:
        f.write("forged\n")
    os.replace("forged.txt", VICTIM)


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
