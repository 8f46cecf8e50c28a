"""The candidate's child under a profiler: the profile stage's run over the guarded model
(profile.py), and a run under Nsight Compute (ncu.py). Imported by worker.py when asked."""

from __future__ import annotations

from typing import Any

from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator import profile
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.model_run import Guarded, load_guarded, synchronize
from kforge_search.problem import exec_problem


def profile_model(guarded: Guarded, module: Any, job: Job) -> Any:
    """The profile stage (evaluator/profile.py) over the guarded model, on timing inputs."""
    import torch

    inputs = job_inputs.timing_inputs(module, job, 0)

    def call() -> None:
        with torch.no_grad():
            guarded.model(*inputs)

    guarded.counter.trace = profile.LaunchTrace()
    try:
        return profile.collect(
            call, job.device, guarded.counter.trace, lambda: synchronize(job.device)
        )
    except Exception as exc:  # advice only: a profiler failure never fails the candidate
        return profile.Profile(
            tool="none",
            device=job.device,
            calls=0,
            wall_us_per_call=0.0,
            launches_per_call=0.0,
            notes=(f"profiling failed: {type(exc).__name__}: {exc}",),
        )


def run_ncu(job: Job, channel: Channel) -> None:
    """Under Nsight Compute (--profile-from-start off): warm up, then one forward call inside
    the profiler range, so ncu measures exactly one call's kernels."""
    import torch

    module = exec_problem(job.problem)
    channel.stage("build")
    guarded = load_guarded(job, module)
    inputs = job_inputs.timing_inputs(module, job, 0)
    channel.stage("profile")
    with torch.no_grad():
        for _ in range(2):
            guarded.model(*inputs)
        synchronize(job.device)
        torch.cuda.profiler.start()
        guarded.model(*inputs)
        synchronize(job.device)
        torch.cuda.profiler.stop()
    guarded.check_world()
    channel.send("ncu")
