"""Adversarial (cpu-triton, level1/10_elementwise_chain): writing through a symlink to outside.

Trick: forward creates a symlink in its work folder pointing to
/tmp/kforge_fs_sandbox_target/victim.txt, then opens the symlink for writing.

Expected: REJECTED, reason "sandbox:write-outside" (the audit hook resolves the path);
below it, Landlock checks the file the open resolves to (EACCES). The victim is unchanged.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
VICTIM = "/tmp/kforge_fs_sandbox_target/victim.txt"  # tests/adversarial/test_fs_sandbox.py


def _attack() -> None:
    os.symlink(VICTIM, "victim_link")
    with open("victim_link", "a") as f:
        f.write("tampered through a symlink\n")


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
