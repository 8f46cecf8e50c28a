"""Adversarial (cpu-triton, level1/10_elementwise_chain): timed outputs precomputed from the
harness's seeds.

Trick: an attacker who read the harness knows how timing inputs used to be drawn: the
problem's get_inputs() under torch.manual_seed(seed + 100000 + run), with the default seed
2024. When it is built (outside any forward) this candidate draws those inputs itself, at
the sizes it was built for, and computes every timed run's output ahead of time; after the
verification trials (computed honestly) each call returns the next precomputed output
without any work (a launch that stores nothing keeps a launch counter happy). With fixed
timing seeds the timed outputs matched the reference's and the timed runs measured nothing.

Expected: REJECTED with reason "timing:stale-output": timing inputs come from fresh OS
randomness sent after the candidate is loaded, and whole outputs of timed runs chosen after
they ran are checked against an oracle.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
HARNESS_SEED = 2024
VERIFY_CALLS = 9  # 5 trials, 2 of a second distribution, a wide and a shifted one
WARMUP = 1
SHAPE = (16, 1000)  # the problem's "ci" sizes, where the harness's tests run it


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n = xc.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.ahead: list[torch.Tensor] = []
        state = torch.get_rng_state()
        for run in range(64):
            torch.manual_seed(HARNESS_SEED + 100_000 + run)
            self.ahead.append(_chain(torch.randn(SHAPE)))
        torch.set_rng_state(state)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= VERIFY_CALLS:
            return _chain(x)
        run = max(0, self.calls - VERIFY_CALLS - 1 - WARMUP)
        out = self.ahead[run % len(self.ahead)]
        _chain_kernel[(1,)](x, out, 0, BLOCK=BLOCK)  # a launch that stores nothing
        return out
