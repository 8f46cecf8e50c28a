"""The baseline child (`Job.mode == "baseline"`): the problem's reference as each peer kind
(evaluator/peers.py), checked against the reference's outputs on the verification trials
(and, where the job has them, at the problem's unseen sizes against that reference's),
then timed when the parent says so. It never loads a candidate.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import asdict
from typing import Any

from kforge_search.evaluator import buffers as model_buffers
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator import out_of_memory, peers
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.model_run import build_model, synchronize, time_model
from kforge_search.evaluator.result import PeerCheck
from kforge_search.evaluator.timing import Clocks, capture_clocks
from kforge_search.problem import exec_problem


def run_baselines(job: Job, channel: Channel) -> None:
    """Every kind is first built (and compiled) at its precision, checked against the
    reference on the verification trials (peers.py; not fp32 eager, the reference itself)
    and warmed up, then checked at the unseen sizes (`unseen_checked`), all under the
    parent's shared hold; then each is timed as often as the parent asks, in one exclusive
    hold for all of them ("timed" ends it). Timed kind by kind, a node's evaluators
    measuring baselines side by side met at every kind: each timing waited for every other
    child's compile (H100, 8 actors: 4 rounds of up to 3 minutes)."""
    clocks = capture_clocks(job.device)
    module = exec_problem(job.problem)
    reference = loaded_reference(job.reference_path, job.device)
    unchanged: set[str] = set()  # reduced precisions that change no output of the problem
    ready: list[tuple[str, Any]] = []
    published: dict[str, tuple[PeerCheck, ...]] = {}  # each kind's checks at the sizes
    for i, kind in enumerate(job.baseline_kinds):
        if i:  # the parent lets a timing that waits go first
            channel.safe_point(kind=kind)
        channel.stage(f"baseline-{kind}")
        precision = peers.split_kind(kind)[1]
        if precision in unchanged:
            channel.send("check", kind=kind, checks=[], note=peers.SAME)
            channel.send("baseline", kind=kind, ok=False, error=f"{precision} {peers.SAME}")
            continue
        try:
            with peers.precision(precision):
                fn = prepare_baseline(job, module, kind, reference, channel, published)
        except Exception as exc:
            failed(channel, kind, exc)
            continue
        if fn == peers.SAME:
            unchanged.add(precision)
        elif fn is not None:
            ready.append((kind, fn))
    if job.unseen is not None and job.unseen_reference_path:
        # the reference goes before the unseen one comes: the job's memory limit is the
        # larger one's (pipeline: Footprint.largest), not both
        reference = None
        ready = unseen_checked(job, ready, published, channel)
    channel.stage("baseline-timed")
    for kind, fn in ready:
        try:
            with peers.precision(peers.split_kind(kind)[1]):
                command = time_baseline(job, module, kind, fn, clocks, channel)
        except Exception as exc:
            failed(channel, kind, exc)
            continue
        if command != "next":
            return
    channel.send("timed")


def loaded_reference(path: str, device: str) -> dict[str, Any] | None:
    """What the parent wrote for the checks (placed_reference), None where it wrote none."""
    import torch

    if not path:  # a streamed reference: not held by the parent
        return None
    return placed_reference(torch.load(path, weights_only=True), device)


def unseen_checked(
    job: Job,
    ready: list[tuple[str, Any]],
    published: dict[str, tuple[PeerCheck, ...]],
    channel: Channel,
) -> list[tuple[str, Any]]:
    """The prepared kinds, each checked at the problem's unseen sizes as a candidate is: a
    new model from the unseen init inputs, the same kind (mode, precision), the unseen
    reference's trials, every policy ("check"); those that pass no policy there that they
    pass at the problem's sizes (or raise there) are not timed. After every kind's
    preparation, each compile here with static shapes (`dynamic=False`, what a first
    compile at these sizes gives): a compile at other shapes of the same forward makes
    Dynamo's later compiles of it dynamic (automatic dynamic shapes), and a kind's compile
    at the problem's sizes after one here would be timed so."""
    assert job.unseen is not None
    module = exec_problem(job.unseen)
    reference = loaded_reference(job.unseen_reference_path, job.device)
    kept = []
    for kind, fn in ready:
        if kind == "eager":  # fp32 eager: the reference itself, there too
            kept.append((kind, fn))
            continue
        channel.safe_point(kind=kind)
        channel.stage(f"baseline-{kind}-unseen")
        mode, precision = peers.split_kind(kind)
        try:
            with peers.precision(precision):
                model = build_model(module.Model, module, job)
                run = peers.runnable(model, precision, job.device)
                if mode == "compile":
                    run = compiled(run, channel, job.device, dynamic=False)
                checks, _ = checked(job, module, model, run, reference, channel, unseen=True)
        except Exception as exc:
            failed(channel, kind, exc, "at the unseen sizes: ")
            continue
        channel.send("check", kind=kind, checks=[asdict(c) for c in checks], note="")
        failing = {c.policy for c in (*published.get(kind, ()), *checks) if not c.passed}
        if any(c.policy not in failing for c in checks):
            kept.append((kind, fn))
            continue
        last = [c for c in checks if not c.passed][-1]
        why = f"fails at the unseen sizes ({last.policy}: {last.mismatch}) every policy it passes"
        channel.send("baseline", kind=kind, ok=False, error=f"{why} at the problem's: not timed")
    return kept


def failed(channel: Channel, kind: str, exc: Exception, where: str = "") -> None:
    """A kind whose preparation, check (`where`: "at the unseen sizes: ") or timing raised;
    `busy`: it ran out of device memory that other processes held (the parent measures it
    again alone and caches none of it). After an out-of-memory the kind's tensors (its
    frames' locals) and the allocator's cache go, for the kinds after it and the processes
    beside it."""
    import torch

    error = f"{where}{type(exc).__name__}: {exc}"
    busy = bool(out_of_memory.busy_reasons(exc))
    if out_of_memory.device_oom(exc):
        traceback.clear_frames(exc.__traceback__)
        torch.cuda.empty_cache()
    channel.send("baseline", kind=kind, ok=False, error=error, busy=busy)


def placed_reference(loaded: dict[str, Any], device: str) -> dict[str, Any]:
    """The reference the parent wrote (outputs, buffers, exact, trial_ids, wide, plain,
    scales) with its tensors on `device` where they fit (verify.placed: a CPU comparison of
    a level-2 problem at its published size took 26 s of the child's 63 on the H100's
    host), and "where": the device its tensors are on (the kinds' outputs go there too)."""
    from kforge_search.evaluator import verify

    tensors = {k: loaded[k] for k in ("outputs", "buffers", "exact")}
    moved = verify.placed(tensors, device if device.startswith("cuda") else None)
    return {**loaded, **moved, "where": device if moved is not tensors else "cpu"}


def compiled(
    model: Any,
    channel: Channel,
    device: str,
    aside: bool | None = None,
    dynamic: bool | None = None,
) -> Any:
    """torch.compile(model) with Inductor, as `torch.compile`'s default; on an accelerator
    (or `aside`) each graph's compile runs off the device lock: the parent lets its shared
    hold go ("aside": Dynamo's trace, AOTAutograd and Inductor's codegen and kernel builds
    are CPU work) and takes it back before the compiled graph first runs (a safe point,
    behind any timing that waits). Its autotuning runs at that first call, on the lane. On
    the CPU a compile is the timed runs' own resource: it stays under the hold. `dynamic`:
    torch.compile's (unseen_checked: False)."""
    import torch

    if not (device.startswith("cuda") if aside is None else aside):
        return torch.compile(model, dynamic=dynamic)
    from torch._inductor.compile_fx import compile_fx

    def inductor_off_the_lane(graph: Any, example_inputs: Any) -> Any:
        channel.send("aside")
        try:
            return compile_fx(graph, example_inputs)
        finally:
            channel.safe_point(back="compiled")

    return torch.compile(model, backend=inductor_off_the_lane, dynamic=dynamic)


def prepare_baseline(
    job: Job,
    module: Any,
    kind: str,
    reference: Any,
    channel: Channel,
    published: dict[str, tuple[PeerCheck, ...]] | None = None,
) -> Any:
    """One kind, under its precision: built, compiled, checked (its checks also kept in
    `published`) and warmed up. Returns the callable to time, None when the kind fails
    every policy, or peers.SAME when its precision changes nothing here (neither is
    timed)."""
    import torch

    mode, precision = peers.split_kind(kind)
    model = build_model(module.Model, module, job)
    # each kind its own model and its own compile: Dynamo's guards on the global state
    # (the matmul precision) keep the compiled code of one kind from serving another
    run = peers.runnable(model, precision, job.device)
    fn = compiled(run, channel, job.device) if mode == "compile" else run
    if reference is not None and kind != "eager":
        checks, note = checked(job, module, model, fn, reference, channel, precision != peers.FP32)
        if published is not None:
            published[kind] = checks
        channel.send("check", kind=kind, checks=[asdict(c) for c in checks], note=note)
        if note:
            channel.send("baseline", kind=kind, ok=False, error=f"{precision} {note}")
            return peers.SAME
        if not any(c.passed for c in checks):
            loose = checks[-1]
            why = f"fails every policy ({loose.policy}: {loose.mismatch}): not timed"
            channel.send("baseline", kind=kind, ok=False, error=why)
            return None
    with torch.no_grad():  # compiled and warmed up before the parent's exclusive hold
        fn(*job_inputs.timing_inputs(module, job, 0))
    synchronize(job.device)
    return fn


def checked(
    job: Job,
    module: Any,
    model: Any,
    fn: Any,
    reference: dict[str, Any],
    channel: Channel,
    reduced: bool = False,
    unseen: bool = False,
) -> tuple[tuple[PeerCheck, ...], str]:
    """peers.check_kind for `fn` (of `model`, built from `module`) on the reference's
    trials, under the precision the caller set (`reduced`: not fp32); `unseen`: the module
    and reference are the problem's at its unseen sizes."""
    import torch

    names = tuple(sorted({n for trial in reference["buffers"] for n in trial}))
    where = reference["where"]

    def run_trials() -> tuple[list[list[Any]], list[dict[str, Any]]]:
        from kforge_search.evaluator import verify

        outputs, states = [], []
        for trial in reference["trial_ids"]:
            with torch.no_grad():
                out = fn(*job_inputs.make_inputs(module, job, trial))
            items = list(out) if isinstance(out, list | tuple) else [out]
            outputs.append([t.detach().to(where).clone() for t in items])
            states.append(verify.placed(model_buffers.reported(model, names), where))
        return outputs, states

    # a reference too large for the device (verify.placed) is compared on the CPU, the
    # device idle: the lock goes for it (3_Batched at its published size, ~12 GiB with
    # its float64 copies: its baseline child held the lock shared for 120-153 s with
    # its compiles already off it, most likely here)
    off = where == "cpu" and job.device.startswith("cuda")
    aside = (lambda: channel.send("aside")) if off else bool
    found = peers.check_kind(
        run_trials, reference, reduced, reference["scales"], ran=aside, unseen=unseen
    )
    if off:
        channel.safe_point(back="checked")
    return found


def time_baseline(
    job: Job, module: Any, kind: str, fn: Any, clocks: Clocks, channel: Channel
) -> str:
    """One prepared kind timed while the parent says "time"; returns its next command."""
    channel.send("warm", kind=kind)
    command = sys.stdin.readline().strip()
    while command == "time":  # "time" again: the parent saw interference in the spread
        stats, _ = time_model(fn, module, job, clocks)
        channel.send("baseline", kind=kind, ok=True, timing=asdict(stats))
        command = sys.stdin.readline().strip()
    return command
