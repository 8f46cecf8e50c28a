"""Adversarial (cpu-triton, level1/10_elementwise_chain): timed outputs computed in advance.

Trick: ModelNew.__init__ runs in the build stage, untimed and unwatched. There the candidate
finds the harness's Job (gc.get_objects()) and the problem's module, which tell it the seeds
and the number of the timed runs, and it makes the timed runs' inputs itself with the
harness's own inputs.timing_inputs (random states saved and restored) and computes their
outputs with its (honest) kernel. forward reads torch.initial_seed() (the harness seeds torch
before it makes each run's inputs): on a seed it prepared, it returns the prepared output at
once; otherwise it computes. Every output is correct, the timed runs do no work.

Expected: REJECTED, reason "timing:stale-output", or INCORRECT (timing inputs the candidate
cannot predict).
"""

import gc
import random
import types

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


def _harness_job():
    for obj in gc.get_objects():
        kind = type(obj)
        if kind.__name__ == "Job" and kind.__module__.endswith("evaluator.job"):
            return obj
    return None


def _problem_modules() -> list[types.ModuleType]:
    return [
        obj
        for obj in gc.get_objects()
        if type(obj) is types.ModuleType  # not torch.ops' namespaces, which make ops on lookup
        and "get_inputs" in vars(obj)
        and "KFORGE_SIZES" in vars(obj)
    ]


def _precompute() -> dict[tuple[int, tuple[int, ...]], torch.Tensor]:
    job = _harness_job()
    if job is None:
        return {}
    try:
        from kforge_search.evaluator import inputs
    except ImportError:
        return {}
    import numpy

    ready = {}
    py_state, np_state = random.getstate(), numpy.random.get_state()
    with torch.random.fork_rng(devices=[]):
        for module in _problem_modules():
            for run in range(job.timed_runs):
                (x,) = inputs.timing_inputs(module, job, run)
                ready[(job.timing_seed(run), tuple(x.shape))] = _chain(x)
    random.setstate(py_state)
    numpy.random.set_state(np_state)
    return ready


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ready = _precompute()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ready = self._ready.get((torch.initial_seed(), tuple(x.shape)))
        if ready is not None:
            return ready
        return _chain(x)
