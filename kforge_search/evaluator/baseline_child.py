"""The baseline child (`Job.mode == "baseline"`): the problem's reference as each peer kind
(evaluator/peers.py), checked against the reference's outputs on the verification trials,
then timed when the parent says so. It never loads a candidate.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

from kforge_search.evaluator import buffers as model_buffers
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator import peers
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.timing import Clocks, capture_clocks
from kforge_search.evaluator.worker import Channel, build_model, synchronize, time_model
from kforge_search.problem import exec_problem


def run_baselines(job: Job, channel: Channel) -> None:
    """Each kind: built (and compiled) at its precision, checked against the reference on
    the verification trials (peers.py; not fp32 eager, the reference itself), warmed up,
    then timed as often as the parent asks."""
    import torch

    clocks = capture_clocks(job.device)
    module = exec_problem(job.problem)
    reference = torch.load(job.reference_path, weights_only=True) if job.reference_path else None
    unchanged: set[str] = set()  # reduced precisions that change no output of the problem
    for kind in job.baseline_kinds:
        channel.stage(f"baseline-{kind}")
        precision = peers.split_kind(kind)[1]
        if precision in unchanged:
            channel.send("check", kind=kind, checks=[], note=peers.SAME)
            channel.send("baseline", kind=kind, ok=False, error=f"{precision} {peers.SAME}")
            continue
        try:
            with peers.precision(precision):
                command = time_baseline(job, module, kind, reference, clocks, channel)
            if command == peers.SAME:
                unchanged.add(precision)
            elif command and command != "next":
                return
        except Exception as exc:
            channel.send("baseline", kind=kind, ok=False, error=f"{type(exc).__name__}: {exc}")


def time_baseline(
    job: Job, module: Any, kind: str, reference: Any, clocks: Clocks, channel: Channel
) -> str:
    """One kind, under its precision: checked, warmed up, timed while the parent says
    "time". Returns the parent's next command, "" when the kind fails every policy, or
    peers.SAME when its precision changes nothing here (neither is timed)."""
    import torch

    mode, precision = peers.split_kind(kind)
    if mode == "compile":
        torch._dynamo.reset()  # compiled afresh under this kind's settings
    model = build_model(module.Model, module, job)
    fn = torch.compile(model) if mode == "compile" else model
    if reference is not None and kind != "eager":
        names = tuple(sorted({n for trial in reference["buffers"] for n in trial}))

        def run_trials() -> tuple[list[list[Any]], list[dict[str, Any]]]:
            outputs, states = [], []
            for trial in reference["trial_ids"]:
                with torch.no_grad():
                    out = fn(*job_inputs.make_inputs(module, job, trial))
                items = list(out) if isinstance(out, list | tuple) else [out]
                outputs.append([t.detach().to("cpu").clone() for t in items])
                states.append(model_buffers.reported(model, names))
            return outputs, states

        checks, note = peers.check_kind(run_trials, reference, precision != peers.FP32)
        channel.send("check", kind=kind, checks=[asdict(c) for c in checks], note=note)
        if note:
            channel.send("baseline", kind=kind, ok=False, error=f"{precision} {note}")
            return peers.SAME
        if not any(c.passed for c in checks):
            loose = checks[-1]
            why = f"fails every policy ({loose.policy}: {loose.mismatch}): not timed"
            channel.send("baseline", kind=kind, ok=False, error=why)
            return ""
    with torch.no_grad():  # compiled and warmed up before the parent's exclusive hold
        fn(*job_inputs.timing_inputs(module, job, 0))
    synchronize(job.device)
    channel.send("warm", kind=kind)
    command = sys.stdin.readline().strip()
    while command == "time":  # "time" again: the parent saw interference in the spread
        stats, _ = time_model(fn, module, job, clocks)
        channel.send("baseline", kind=kind, ok=True, timing=asdict(stats))
        command = sys.stdin.readline().strip()
    return command
