"""Adversarial (cpu-triton, level1/10_elementwise_chain): a hard link to an outside file.

Trick: forward hard-links /tmp/kforge_fs_sandbox_target/victim.txt into its own work
folder (os.link), then opens the link's inside name for writing. The inside name passes a
check by path (its real path lies in the work folder), but the bytes land in the outside file.

Expected: REJECTED, reason "sandbox:write-outside" (the audit hook sees os.link of an outside
file); below it, Landlock refuses the link itself (EXDEV). The victim file is unchanged.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
VICTIM = "/tmp/kforge_fs_sandbox_target/victim.txt"  # tests/adversarial/test_fs_sandbox.py


def _attack() -> None:
    os.link(VICTIM, "victim_link")
    with open("victim_link", "a") as f:
        f.write("tampered through a hard link\n")


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
