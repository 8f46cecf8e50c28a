"""Adversarial (cpu-triton, level1/10_elementwise_chain): chmod of an outside file.

Trick: forward makes /tmp/kforge_fs_sandbox_target/victim.txt world-writable
(os.chmod), so that anything running later, outside any sandbox, can be fed through it.

Expected: REJECTED, reason "sandbox:write-outside" (the audit hook). Landlock cannot confine
chmod(2) (nor chown, utime, xattrs): from native code this stays open (docs/evaluator.md).
The victim file's mode is unchanged.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
VICTIM = "/tmp/kforge_fs_sandbox_target/victim.txt"  # tests/adversarial/test_fs_sandbox.py


def _attack() -> None:
    os.chmod(VICTIM, 0o777)


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
