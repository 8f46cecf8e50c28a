"""Adversarial (cpu-triton, level1/10_elementwise_chain): files made outside, unaudited.

Trick: forward creates a file and a named pipe in /tmp/kforge_fs_sandbox_target, outside its
folders, with os.mknod and os.mkfifo: plain `os` calls for which Python raises no audit event,
so no audit hook sees them (a planted file is a note to a later run, or a name another
program trusts). It ignores every failure and then computes honestly.

Expected: OK, both calls refused by Landlock (EACCES) as its printed report says, and nothing
changed under /tmp/kforge_fs_sandbox_target.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
TARGET = "/tmp/kforge_fs_sandbox_target"  # tests/adversarial/test_fs_sandbox.py
ATTACKS = {
    "mknod": lambda: os.mknod(f"{TARGET}/planted.txt"),
    "mkfifo": lambda: os.mkfifo(f"{TARGET}/planted_fifo"),
}
_attacked: list[bool] = []


def _attack() -> None:
    if _attacked:
        return
    _attacked.append(True)
    for name, attack in ATTACKS.items():
        try:
            attack()
            outcome = "DONE"
        except OSError as exc:
            outcome = f"refused (errno {exc.errno})"
        print(f"fs-attack {name}: {outcome}", flush=True)


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
