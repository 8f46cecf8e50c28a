"""A candidate's timed runs, kept for the parent to check after the fact (child side).

The parent sends the timing draw (fresh OS randomness) only once the candidate is loaded and
verified, so no timed input can be known in advance. The child keeps the whole outputs of
every timed run, then runs a burst of back-to-back calls on inputs of a draw of its own
(again, on a fresh draw, where the parent asks) that the parent times with its own clock,
and then saves the outputs of the runs and burst calls the
parent chose (after they ran) for the parent to compare with a candidate-free oracle's
(pipeline.py, oracle.py). Which runs are checked is decided after the candidate has
returned them all, so it cannot skip or forge any run it guesses is unchecked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator import shared_outputs
from kforge_search.evaluator.job import Job

KEEP_CUDA_BYTES = 4 * 2**30  # at most this much of kept outputs on a GPU ...
KEEP_CUDA_SHARE = 0.25  # ... and at most this share of its free memory
KEEP_CPU_BYTES = 2 * 2**30
MIN_RUNS = 3  # timed runs, however large the outputs (the budget is exceeded for them)


def timed_path(outputs_path: str) -> str:
    """Where the child saves the chosen runs' outputs, beside its verification outputs."""
    return f"{outputs_path}.timed"


def output_bytes(outputs: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in outputs)


def keep_budget(job: Job) -> int:
    """Bytes the kept outputs (and the burst's inputs) may take on the job's device."""
    import torch

    if job.device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info()
        return int(min(KEEP_CUDA_BYTES, KEEP_CUDA_SHARE * free))
    limit = job.memory_limit_mb * 2**20 // 4 if job.memory_limit_mb else KEEP_CPU_BYTES
    return int(min(KEEP_CPU_BYTES, limit))


def affordable_runs(wanted: int, per_run_bytes: int, budget: int) -> int:
    """Timed runs whose outputs all fit the budget (at least MIN_RUNS, at most `wanted`)."""
    fits = budget // max(per_run_bytes, 1)
    return max(min(wanted, MIN_RUNS), min(wanted, fits))


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, list | tuple) else [out]


def read_command() -> list[str]:
    """The parent's next command line on stdin, split into words ([] once it is closed)."""
    return sys.stdin.readline().split()


def run_burst(
    call: Callable[..., Any],
    module: Any,
    job: Job,
    draw: int,
    wanted: int,
    budget: int,
    send: Callable[..., None],
    synchronize: Callable[[], None],
    held: list[list[Any]],
) -> list[list[Any]]:
    """Back-to-back calls on inputs 0..n-1 of the burst's own draw (fresh OS randomness the
    parent sends with each burst: no input the candidate saw before, so no output it could
    keep from a timed run or an earlier burst; each call its own input buffers, made
    beforehand), between "burst-ready" and "burst": the parent times them with its own
    clock. Their outputs are kept (the parent may check any of them). The call that sizes
    them runs on inputs `wanted` of the draw, which no burst call takes.

    `held`: every input set of this process's bursts so far (their sizing calls' too), which
    the caller keeps alive until the outputs are revealed; their bytes come out of `budget`.
    So no burst call's buffer sits at an address an earlier call saw: the allocator would
    hand a freed set's addresses to the next one, and a candidate that does its real work
    only on buffers it has not seen (30b_work_on_fresh_buffers.py) was cheap, and passed, on
    a burst asked again.

    Within the budget only: where the held sets pass it (inputs larger than the budget: a
    16 GiB set of 45_AvgPool2D against 4 GiB), the earlier bursts' sets go before the next
    burst, and a sizing set over the budget is not kept. On the H100 two bursts of that
    problem held 64 GiB between them, and its oracle, which draws a set of its own to check
    the revealed calls, found no room (INFRA_ERROR). A call on a set at an address seen
    before still has its outputs revealed: a candidate that answers it from an earlier call
    returns the wrong values for this draw."""
    if sum(job_inputs.set_bytes(s) for s in held) > budget:
        held.clear()
        _release(job.device)
    probe = job_inputs.timing_inputs(module, job, wanted, draw)
    first = as_list(call(*probe))
    per_call = job_inputs.set_bytes(probe) + output_bytes(first)
    shapes = [(t.shape, t.dtype, t.device) for t in first]
    del first
    if sum(job_inputs.set_bytes(s) for s in held) + job_inputs.set_bytes(probe) <= budget:
        held.append(probe)
    else:
        del probe
        _release(job.device)
    room = budget - sum(job_inputs.set_bytes(s) for s in held)
    n = max(1, min(wanted, room // max(per_call, 1)))
    sets: list[list[Any]] = []
    states = []  # torch's generators as each run's inputs left them (random operators)
    for run in range(n):  # none at an address the candidate was handed before; what a
        # set that landed on one keeps taken comes out of what the burst's n calls leave
        room = budget - sum(job_inputs.set_bytes(s) for s in held) - n * per_call
        sets.append(job_inputs.fresh_timing_inputs(module, job, run, draw, held, room))
        states.append(rng_states(job.device))
    held.extend(sets)
    copies = [_empty(shapes) for _ in range(n)]  # where each call's outputs are copied
    _cache_outputs(shapes)
    synchronize()
    send("burst-ready", calls=n)
    if read_command() != ["go"]:
        return []
    # each call starts from the generators' state its inputs left, as in a timed run (a
    # dropout draws what the oracle's does); its outputs are copied as it returns (a
    # candidate may return one buffer of its own every call): both are in the parent's
    # wall time, and small beside a call. The copies' memory is taken beforehand: a
    # 6 GiB output's clone, allocated in the burst, took the device allocator's slow path
    # on a crowded GPU and a right kernel's one call went over (H200: 30.7 ms, 25.7 allowed)
    outs = []
    for inputs, state, into in zip(sets, states, copies, strict=True):
        set_rng_states(job.device, state)
        outs.append(_copied(as_list(call(*inputs)), into))
    synchronize()
    send("burst", calls=n)
    return outs


def _release(device: str) -> None:
    """Memory of sets let go back to the device (the allocator would keep it cached, out of
    the oracle's reach)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _empty(shapes: list[tuple[Any, Any, Any]]) -> list[Any]:
    """Memory for one call's outputs, taken before the parent's clock starts; on the host
    each page touched as well (zeroed), so that the burst's copies into it pay no first-touch
    page faults. Untouched, they did, on the parent's clock and not in the timed runs (which
    reuse the heap's warm memory call after call): on the 2-CPU VM (firecracker, where a
    page the guest has not touched lately costs the host a fault too) a right cpu-cpp seed
    of 19_ReLU at 16 x 393216 (25 MB an output) took 53-58 ms a burst call against 2.7-7.2
    claimed, and was REJECTED in 2 of 6 bench runs (`timing:wall-clock`)."""
    import torch

    made = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in shapes]
    for t in made:
        if t.device.type == "cpu":
            t.zero_()
    return made


def _cache_outputs(shapes: list[tuple[Any, Any, Any]]) -> None:
    """On a GPU, memory for a call's outputs taken and let go to the allocator's cache, for
    the burst's first call to take. The sizing call's went back to the device with a set
    over the budget, or to the copies, and a burst of one call (a 4 GiB output) then paid
    the device's slow allocation on the parent's clock, which the timed runs, reusing cached
    blocks, had not (H200, a mutant of 91_cumsum_reverse: 32.5 ms against 2.45 claimed, 15.3
    allowed, three bursts; its seed passed: REJECTED, right). Not yet run on a GPU."""
    if any(str(device).startswith("cuda") for _, _, device in shapes):
        _empty(shapes).clear()


def _copied(outputs: list[Any], into: list[Any]) -> list[Any]:
    """Each output copied into its buffer made beforehand where it has that buffer's shape,
    dtype and device, else cloned (a call whose outputs differ from the sizing call's is
    kept as it is: the check compares it all the same)."""
    same = len(outputs) == len(into) and all(
        (t.shape, t.dtype, t.device) == (d.shape, d.dtype, d.device)
        for t, d in zip(outputs, into, strict=True)
    )
    if not same:
        return [t.detach().clone() for t in outputs]
    return [d.copy_(t.detach()) for t, d in zip(outputs, into, strict=True)]


def rng_states(device: str) -> tuple[Any, Any]:
    import torch

    cuda = torch.cuda.get_rng_state() if device.startswith("cuda") else None
    return torch.get_rng_state(), cuda


def set_rng_states(device: str, states: tuple[Any, Any]) -> None:
    import torch

    torch.set_rng_state(states[0])
    if states[1] is not None:
        torch.cuda.set_rng_state(states[1])


def save_chosen(
    path: str,
    timed: list[list[Any]],
    burst: list[list[Any]],
    runs: list[int],
    calls: list[int],
    share: bool = False,
    aside: Callable[[], None] = lambda: None,
) -> None:
    """The chosen timed runs' and burst calls' outputs, in that order, on the CPU; `share`:
    their CUDA IPC handles instead (shared_outputs.py; the caller holds them meanwhile).
    `aside`: said once they are on the host, before the file is written."""
    import torch

    chosen = [timed[r] for r in runs if r < len(timed)]
    chosen += [burst[c] for c in calls if c < len(burst)]
    if share:
        torch.save([shared_outputs.share(list(outs)) for outs in chosen], Path(path))
        return
    on_host = [[t.detach().to("cpu", copy=True) for t in outs] for outs in chosen]
    aside()
    torch.save(on_host, Path(path))
