"""Adversarial (cpu-triton, level1/10_elementwise_chain): timed inputs predicted from the seed.

Trick: the problem's get_inputs() is torch.randn of one shape, and the harness seeds torch
before drawing each timed run's inputs, with seeds that follow each other (torch.initial_seed()
tells the candidate which). In the first call nobody watches (no dispatch mode on the stack:
the untimed warm-up), forward draws the inputs of the next 64 seeds itself (random state
saved and restored), computes their outputs with its (honest) kernel and keeps them; a later
call whose seed and shape it prepared returns the kept output at once. No harness object is
touched: only torch's public seed.

Expected: REJECTED, reason "timing:stale-output", or INCORRECT (timing inputs the candidate
cannot predict).
"""

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


def _chain_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The honest kernel: relu(x * 1.5 + 0.25) * 2.0 - 0.1 into out."""
    n = x.numel()
    _chain_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


def _chain(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    return _chain_into(xc, torch.empty_like(xc))


AHEAD = 64


def _prepare(seed: int, like: torch.Tensor) -> dict[int, torch.Tensor]:
    """The outputs for the next AHEAD seeds' inputs, drawn as get_inputs() draws them (on the
    input's device: a harness that draws there)."""
    ready = {}
    devices = [like.device] if like.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        for s in range(seed, seed + AHEAD):
            torch.manual_seed(s)
            ready[s] = _chain(torch.randn(like.shape, device=like.device))
    return ready


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ready: dict[tuple[int, ...], dict[int, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape, seed = tuple(x.shape), torch.initial_seed()
        if shape not in self._ready and torch._C._len_torch_dispatch_stack() == 0:
            self._ready[shape] = _prepare(seed, x)
        ready = self._ready.get(shape, {}).get(seed)
        if ready is not None:
            return ready
        return _chain(x)
