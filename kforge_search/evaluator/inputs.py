"""How a job's inputs are drawn, in the evaluator's child: seeded per trial and per timed
run, placed on the job's device; after the first trials come trials from a second
distribution, and last a trial of a wider range and a shifted one with a zero slice (where
the reference stays finite on them).

worker.py calls these through this module (`job_inputs.make_inputs`), and the harness checks
their identities here (guards.harness_targets): a candidate that rebinds one is rejected.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

from kforge_search.evaluator.job import Job
from kforge_search.evaluator.out_of_memory import device_oom


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def to_device(value: Any, device: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def second_distribution(value: Any) -> Any:
    """Inputs from another distribution (scaled and shifted floats): constant or degenerate
    outputs that pass on one distribution fail here."""
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * 4.0 + 0.5
    return value


# float inputs of a wide-range trial are scaled by this, per dtype: randn x 100 reaches
# about +-500, where exp overflows in float32 (softmax without max subtraction: inf / inf);
# float16 overflows at 65504, so its inputs grow less
WIDE_SCALE = {"float16": 16.0}
WIDE_SCALE_DEFAULT = 100.0


def wide_range(value: Any) -> Any:
    """The same draw scaled to a wider range: overflow and cancellation that a randn-sized
    input never reaches. A trial whose reference goes non-finite here is dropped."""
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        dtype = str(value.dtype).removeprefix("torch.")
        return value * WIDE_SCALE.get(dtype, WIDE_SCALE_DEFAULT)
    return value


# float inputs of a shifted trial are moved by this, per dtype: a mean 1000 times the spread
# makes E[x^2] - E[x]^2 lose every digit of a variance in float32 (a one-pass layernorm),
# where a two-pass or Welford one (torch's) stays exact to ~1e-5
SHIFT = {"float16": 16.0, "bfloat16": 16.0}
SHIFT_DEFAULT = 1000.0


def shifted(value: Any) -> Any:
    """The same draw moved far from zero, with its first slice (along dim 0) all zeros: a
    mean large against the spread (cancellation), and a row with nothing in it (a norm
    without its eps divides 0 by 0). A trial whose reference goes non-finite is dropped."""
    import torch

    if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
        return value
    dtype = str(value.dtype).removeprefix("torch.")
    moved = value + SHIFT.get(dtype, SHIFT_DEFAULT)
    if moved.dim() >= 1 and moved.shape[0] > 1:
        moved[0] = 0
    return moved


# the last trials, in turn: a wider range, then shifted (where the reference stays finite)
EDGE_KINDS = (wide_range, shifted)


def on_device(device: str) -> Any:
    """A context in which torch's factory calls (torch.randn, torch.zeros, ...) make their
    tensors on `device`, an accelerator's; on the CPU nothing changes. The problem's
    get_inputs() and Model(*get_init_inputs()) run in it: drawn on the CPU, a published-size
    input cost seconds per trial and process (a 4096 x 4096 randn ~0.35 s on the H100 host)."""
    import torch

    return torch.device(device) if device != "cpu" else contextlib.nullcontext()


def drawn(make: Any, device: str, seed: int) -> Any:
    """`make()` seeded, its factory calls on `device` (on_device); where it cannot run
    there (it calls .numpy() on what it drew, say), seeded again and on the CPU: the same
    in every process, so the reference and the candidate still see the same values."""
    seed_everything(seed)
    if device == "cpu":
        return make()
    try:
        with on_device(device):
            return make()
    except Exception as exc:
        if device_oom(exc):  # the device's state, not the program's: another process may draw
            raise  # there, and its values would differ from these
        seed_everything(seed)
        return make()


# The address of every tensor input drawn in this process: in a candidate's child, every
# input the candidate was handed. A burst's inputs sit at none of them (fresh_timing_inputs):
# a candidate that does its real work only on buffers it has not seen
# (30b_work_on_fresh_buffers.py) is cheap on a recycled one, and where the allocator recycled
# them was a matter of allocation order (burst output copies made beforehand let it through)
_HANDED: set[int] = set()


def _addresses(inputs: list[Any]) -> list[int]:
    import torch

    return [x.data_ptr() for x in inputs if isinstance(x, torch.Tensor) and x.numel()]


def _noted(inputs: list[Any]) -> list[Any]:
    _HANDED.update(_addresses(inputs))
    return inputs


def make_inputs(module: Any, job: Job, trial: int) -> list[Any]:
    inputs = list(drawn(module.get_inputs, job.device, job.trial_seed(trial)))
    if trial >= job.first_wide_trial:
        kind = EDGE_KINDS[(trial - job.first_wide_trial) % len(EDGE_KINDS)]
        inputs = [kind(x) for x in inputs]
    elif trial >= job.trials:
        inputs = [second_distribution(x) for x in inputs]
    return _noted(list(to_device(inputs, job.device)))


def draw_seed(draw: int, run: int) -> int:
    """The seed of timed run `run` under the parent's draw (fresh OS randomness sent to the
    candidate's child only once the candidate is loaded and verified: pipeline.py)."""
    return (draw * 1_000_003 + run) % (2**63 - 1)


def timing_inputs(module: Any, job: Job, run: int, draw: int | None = None) -> list[Any]:
    """Fresh inputs for a timed run: seeded by `draw` where given (a candidate's timed runs
    and the oracle's answers about them), else by the job's fixed timing seed (baselines,
    which no candidate shares a process with). On an accelerator the problem's get_inputs()
    runs with the device as torch's default, so its factory calls (torch.randn, ...) draw
    there: fresh inputs come before every timed run, and a 1024x8192 randn on the CPU plus
    its copy took ~60 ms each, 3 s of a 10 s evaluation on the H100. The oracle draws the
    same way, so its outputs are those of the candidate's timed runs."""
    return _noted(_timing_inputs(module, job, run, draw))


def _timing_inputs(module: Any, job: Job, run: int, draw: int | None) -> list[Any]:
    seed = job.timing_seed(run) if draw is None else draw_seed(draw, run)
    return list(to_device(list(drawn(module.get_inputs, job.device, seed)), job.device))


def set_bytes(inputs: list[Any]) -> int:
    """Bytes of an input set's tensors."""
    return sum(x.numel() * x.element_size() for x in inputs if hasattr(x, "numel"))


FRESH_TRIES = 4  # draws of one burst input set, at most, before one at a handed address stands


def fresh_timing_inputs(
    module: Any, job: Job, run: int, draw: int, held: list[list[Any]], room: int
) -> list[Any]:
    """timing_inputs at addresses no input drawn in this process had before: a set that
    lands on one is kept in `held` (its memory stays taken, so the next draw goes elsewhere)
    and drawn again, the same values, while its bytes fit `room` (at most FRESH_TRIES)."""
    for _ in range(FRESH_TRIES - 1):
        inputs = _timing_inputs(module, job, run, draw)
        if not _HANDED.intersection(_addresses(inputs)):
            return _noted(inputs)
        size = set_bytes(inputs)
        if size > room:
            break
        held.append(inputs)
        room -= size
    return timing_inputs(module, job, run, draw)
