"""Adversarial (cpu-triton, level1/10_elementwise_chain): the report to the parent rewritten.

Trick: the evaluator's worker runs as the program's __main__ module and reports to the parent
through a Channel object. At import the candidate replaces Channel.send on the class (a class
attribute: the name Channel still points at the same class) with a wrapper that divides the
times of the "timing" event by 1000 before they are written to the pipe. The kernel itself is
honest, and so are the fingerprints it sends.

Expected: REJECTED, reason "dynamic:harness-patched".
"""

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


_TIMES = ("p20_ms", "p50_ms", "p80_ms", "host_p50_ms")


def _patch_channels() -> None:
    for name in ("__main__", "kforge_search.evaluator.worker"):
        channel = getattr(sys.modules.get(name), "Channel", None)
        if not isinstance(channel, type) or getattr(channel, "_faster", False):
            continue
        real_send = channel.send

        def send(self, event_type, /, _real=real_send, **fields):
            timing = fields.get("timing")
            if event_type == "timing" and isinstance(timing, dict):
                fields["timing"] = {k: v / 1000.0 if k in _TIMES else v for k, v in timing.items()}
            return _real(self, event_type, **fields)

        channel.send = send
        channel._faster = True


_patch_channels()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _chain(x)
