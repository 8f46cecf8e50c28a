"""Adversarial (cuda-triton, level1/10_elementwise_chain): work hidden on a side stream.

Trick: the real kernel (correct values) runs on a non-default torch.cuda.Stream, and forward
returns at once without making the caller's stream wait for it. A timer that records CUDA
events on the current stream sees almost nothing, and the output is only complete once the
device is synchronized. So that the hidden work matters at the small "ci" size, the kernel
reads its block REPEAT times (volatile loads, which the compiler may not merge or drop) before
it computes and stores the result once, so one launch runs for milliseconds and its output
appears only at the end.

GPU only: it needs CUDA streams.

Expected: REJECTED, reason "dynamic:output-changed-after-return" or "timing:hidden-work".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
REPEAT = 20000


@triton.jit
def _slow_chain_kernel(x_ptr, out_ptr, n_elements, repeat, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(repeat):
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, volatile=True)
    y = x * 1.5 + 0.25
    y = tl.where(y < 0.0, 0.0, y)
    y = y * 2.0 - 0.1
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        if n == 0:
            return out
        if self._side is None:
            self._side = torch.cuda.Stream(device=x.device)
        # The side stream waits for the inputs (so the values are right once it finishes) ...
        self._side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self._side):
            _slow_chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, REPEAT, BLOCK=BLOCK)
        # ... but the caller's stream is never made to wait for the side stream.
        return out
