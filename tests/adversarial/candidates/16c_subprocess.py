"""Adversarial (cpu-triton, level1/10_elementwise_chain): spawning a process from Python.

Trick: forward computes honestly with the kernel, and also runs `true` through
subprocess.run (errors ignored): a process the evaluator did not start could outlive the
evaluation, do work outside the timed region, or touch anything the user can.

Expected: REJECTED, reason "sandbox:subprocess".
"""

import contextlib
import subprocess

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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with contextlib.suppress(Exception):
            subprocess.run(["true"], check=False, timeout=5)
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
