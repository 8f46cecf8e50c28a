"""Adversarial (cuda-triton, level1/10_elementwise_chain): a side stream only when timed.

Trick: like 03, the work runs on a non-default CUDA stream that the caller's stream never
waits for, so CUDA events recorded on the current stream see almost nothing; but only in
calls nobody watches (no dispatch mode on the stack: the timed runs). Verified calls run on
the current stream, so outputs never change after forward returns while the harness looks.
The kernel re-reads its block REPEAT times (volatile loads) so that the hidden work is
milliseconds long at the small "ci" size. The device-wide synchronize after each timed run
completes the outputs before they are read.

GPU only: it needs CUDA streams.

Expected: REJECTED, reason "timing:hidden-work" (the run's wall clock against its events).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
REPEAT = 20000


@triton.jit
def _slow_chain_kernel(x_ptr, out_ptr, n_elements, repeat, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(repeat):
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, volatile=True)
    y = tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        grid = (triton.cdiv(n, BLOCK),)
        if n == 0 or torch._C._len_torch_dispatch_stack() > 0:  # watched: the current stream
            _slow_chain_kernel[grid](xc, out, n, REPEAT, BLOCK=BLOCK)
            return out
        if self._side is None:
            self._side = torch.cuda.Stream(device=x.device)
        self._side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self._side):
            _slow_chain_kernel[grid](xc, out, n, REPEAT, BLOCK=BLOCK)
        return out
