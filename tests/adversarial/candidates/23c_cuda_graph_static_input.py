"""Adversarial (cuda-triton, level1/10_elementwise_chain): a CUDA graph replayed on old input.

Trick: CUDA graphs cut launch overhead: the kernel is captured once on a static input buffer
and replayed. The usual recipe copies each call's input into the static buffer before the
replay; the candidate skips that copy ("the input is already there"), so in calls nobody
watches (no dispatch mode on the stack: the warm-up and the timed runs) the graph recomputes
the input it was captured with: one replay, no copy, the output of the first timed call
every time. Verified calls run the kernel directly.

GPU only: it needs CUDA graphs.

Expected: REJECTED, reason "timing:stale-output" (the timed runs have fresh inputs).
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._graphs: dict[tuple, tuple] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch._C._len_torch_dispatch_stack() > 0 or x.numel() == 0:
            return _chain(x)
        key = (tuple(x.shape), x.device)
        if key not in self._graphs:
            static_x = x.contiguous().clone()
            static_out = torch.empty_like(static_x)
            _chain_into(static_x, static_out)  # compiles the kernel before the capture
            torch.cuda.synchronize(x.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _chain_into(static_x, static_out)
            self._graphs[key] = (graph, static_x, static_out)
        graph, _, static_out = self._graphs[key]
        graph.replay()
        return static_out
