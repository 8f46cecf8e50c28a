"""Adversarial (cpu-triton, level1/10_elementwise_chain): writing a file outside its temp dir.

Trick: forward computes honestly with the kernel, and also writes a file outside the
evaluator's temporary folder, /tmp/kforge_adversarial_marker (a "cache" or a note to a later
run: anything that persists across evaluations can leak answers or tamper with the harness).

Expected: REJECTED, reason "sandbox:write-outside"; the marker file must not exist afterwards.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
MARKER = "/tmp/kforge_adversarial_marker"


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
        with open(MARKER, "a") as f:
            f.write(f"forward called on {tuple(x.shape)}\n")
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
