"""Adversarial (cpu-triton, level1/10_elementwise_chain): the evaluator's timing code replaced.

Trick: at import, the candidate imports the evaluator's own timing module (it runs in the
evaluator's worker process, so the module is right there) and replaces its functions: the
statistics helper gets a fake that divides every time by 1000, the timing methods get fakes
that report 1 microsecond per run, both as module attributes and in its METHODS table. The
kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


def _patch_harness() -> None:
    try:
        from kforge_search.evaluator import timing
    except ImportError:
        return
    real_stats = getattr(timing, "stats", None)
    if not callable(real_stats):
        return

    def fast_stats(method, times_ms, *args, **kwargs):
        return real_stats(method, [t / 1000.0 for t in times_ms], *args, **kwargs)

    def fake_method(fn, device, warmup, runs, *args, **kwargs):
        fn()
        return real_stats("perf_counter", [0.001] * max(int(runs), 1))

    timing.stats = fast_stats
    for name in ("time_perf_counter", "time_cuda_events"):
        if hasattr(timing, name):
            setattr(timing, name, fake_method)
    methods = getattr(timing, "METHODS", None)
    if isinstance(methods, dict):
        for key in list(methods):
            methods[key] = fake_method


_patch_harness()


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
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        _chain_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK)
        return out
