"""Adversarial (cpu-triton, level1/10_elementwise_chain): the running worker's timing replaced.

Trick: `python -m kforge_search.evaluator.worker` runs the worker as __main__, a module of
its own: an import of kforge_search.evaluator.worker elsewhere (a harness checking its own
functions, say) gets a second copy. At import the candidate rebinds time_model in
sys.modules["__main__"], the copy that runs, to a wrapper that calls the real one (honest
runs, honest fingerprints) and divides the statistics by 1000. The kernel itself is honest.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

import dataclasses
import sys

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


def _patch_running_worker() -> None:
    main = sys.modules.get("__main__")
    real = getattr(main, "time_model", None)
    if not callable(real):
        return

    def time_model(*args, **kwargs):
        stats, prints = real(*args, **kwargs)
        faster = {
            f.name: getattr(stats, f.name) / 1000.0
            for f in dataclasses.fields(stats)
            if f.name.endswith("_ms")
        }
        return dataclasses.replace(stats, **faster), prints

    main.time_model = time_model


_patch_running_worker()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
