"""The evaluator's child process: `python -m kforge_search.evaluator.worker JOB.json EVENT_FD`.

It runs one job (a candidate, the reference, or the baselines) and reports to the parent as
JSON lines on EVENT_FD. The parent owns every decision about status: it enforces the time,
memory and output limits, compares outputs, and kills this process when it must.
"""

from __future__ import annotations

import functools
import gc
import os
import resource
import sys
from dataclasses import asdict
from typing import Any

from kforge_search.evaluator import buffers as model_buffers
from kforge_search.evaluator import (
    compiling,
    footprint,
    guards,
    out_of_memory,
    shared_outputs,
    timed_runs,
    zygote,
)
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator.cache_seal import private_dir
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.child_failure import CandidateFailure
from kforge_search.evaluator.job import PROFILE_ENV, Job, trial_path
from kforge_search.evaluator.landlock import confine_child
from kforge_search.evaluator.model_run import (
    Guarded,
    build_guarded_model,
    forward_failed,
    load_guarded,
    synchronize,
    time_model,
)
from kforge_search.evaluator.phases import profiled
from kforge_search.evaluator.standby import fork_safe_cuda_check, fork_unfit, standby, warm_up
from kforge_search.evaluator.timing import capture_clocks
from kforge_search.paths import cache_dir
from kforge_search.problem import exec_problem
from kforge_search.procs.cpu_parts import child_name, name_self


def run_candidate(job: Job, channel: Channel) -> None:
    clocks = capture_clocks(job.device)
    module = exec_problem(job.problem)
    channel.stage("build")
    # compiles after the build stage are timed as builds, and on a GPU run off its lock
    back = functools.partial(channel.safe_point, back="compiled")
    compiling.announce(channel.send, off_lane=compiling.off_lane(job.device, channel.send, back))
    guarded = load_guarded(job, module, clocks)
    guarded.check_harness()
    guarded.check_world()

    channel.stage("verify")
    per_run_bytes = verify_trials(
        guarded, module, job, job.outputs_path, job.kept_trials(), channel, job.share_outputs
    )
    guarded.check_harness()
    channel.send("verified")
    command = timed_runs.read_command()
    if len(command) != 2 or command[0] != "time":
        return
    draw = int(command[1])  # fresh OS randomness, drawn by the parent after verification

    channel.stage("time")
    budget = timed_runs.keep_budget(job)
    kept: list[Any] = []
    while True:  # again, on a fresh draw, where the parent asks (candidate_drive.py)
        kept = []  # the last try's outputs go before the next try's are made
        try:
            stats, kept = time_model(
                guarded.model, module, job, clocks, draw, budget, per_run_bytes
            )
        except Exception as exc:
            raise forward_failed(guarded, exc, "while being timed") from exc
        guarded.check_harness()
        guarded.check_world()
        channel.send("timing", timing=asdict(stats), runs=len(kept))
        command = timed_runs.read_command()
        if len(command) != 2 or command[0] != "time":
            break
        draw = int(command[1])
    burst: list[list[Any]] = []
    held: list[list[Any]] = []  # every burst's inputs, alive until revealed: run_burst
    while command[:1] == ["burst"] and len(command) == 3:  # again on the parent's word
        import torch

        def sync() -> None:
            synchronize(job.device)

        channel.stage("time-burst")  # under the time stage's limit
        burst = []  # the last burst's outputs go before the next burst's are made
        wanted, burst_draw = int(command[1]), int(command[2])  # a fresh draw each burst
        try:
            with torch.no_grad():
                burst = timed_runs.run_burst(
                    guarded.model,
                    module,
                    job,
                    burst_draw,
                    wanted,
                    budget,
                    channel.send,
                    sync,
                    held,
                )
        except Exception as exc:
            raise forward_failed(guarded, exc, "in back-to-back calls") from exc
        guarded.check_harness()
        guarded.check_world()
        command = timed_runs.read_command()
    if command[:1] == ["reveal"]:
        runs, _, calls = " ".join(command[1:]).partition("|")
        path = timed_runs.timed_path(job.outputs_path)
        chosen_runs, chosen_calls = [int(r) for r in runs.split()], [int(c) for c in calls.split()]
        share = job.share_outputs or job.share_timed  # handles for the oracle, held till then
        timed_runs.save_chosen(path, kept, burst, chosen_runs, chosen_calls, share,
                               aside=lambda: channel.host_work(job.device))  # fmt: skip
        channel.send("revealed")
        command = timed_runs.read_command()
    del kept, burst, held
    if command[:1] == ["profile"]:
        channel.stage("profile")
        from kforge_search.evaluator.profile_child import profile_model

        profiled = profile_model(guarded, module, job)
        guarded.check_harness()
        guarded.check_world()
        channel.send("profile", profile=asdict(profiled))
        command = timed_runs.read_command()
    if command[:1] == ["unseen"] and job.unseen is not None:
        verify_unseen(guarded, job, channel)


def verify_unseen(guarded: Guarded, job: Job, channel: Channel) -> None:
    """The same verification at the problem's unseen sizes, in this process: a new model
    built from the unseen init inputs, the same trials and seeds, the same defences. (A
    fresh process would only add its start-up: the candidate already ran here.)"""
    import torch

    assert job.unseen is not None
    channel.stage("unseen")
    module = exec_problem(job.unseen)
    guarded.model = None  # the first model's memory goes before the second is built
    gc.collect()
    if job.device.startswith("cuda"):
        torch.cuda.empty_cache()
    guarded.model = build_guarded_model(guarded.cls, module, job, guarded.world, guarded.native)
    verify_trials(
        guarded,
        module,
        job,
        job.unseen_outputs_path,
        job.kept_trials(unseen=True),
        channel,
        job.share_unseen,
    )
    guarded.check_harness()
    guarded.check_world()
    channel.send("unseen")


def verify_trials(
    guarded: Guarded,
    module: Any,
    job: Job,
    outputs_path: str,
    kept: list[int],
    channel: Channel,
    share: bool = False,
) -> int:
    """The verification trials the reference kept on one model, in order: each trial's
    outputs and the buffers the reference's forward changes as they stand after it, saved
    for the parent in a file of their own (trial_path), one trial at a time: the parent
    says `next` once it has read it. `share`: the outputs stay on the device, the file
    holds their CUDA IPC handles for the oracle (shared_outputs.py), and they are held
    until `next` (or, after `ahead`, the next trial's command). Returns the bytes of one
    trial's outputs."""
    import torch

    largest = 0
    compared: Any = None  # a shared trial's outputs, still read by the oracle (`ahead`)
    for pos, trial in enumerate(kept):  # one trial in memory at a time: a file of its own
        outputs = guarded.forward(job_inputs.make_inputs(module, job, trial), trial)
        largest = max(largest, timed_runs.output_bytes(outputs))
        if share:
            synchronize(job.device)
            saved = shared_outputs.share(list(outputs))
        else:
            # one copy, under the hold (a device's copy to the host): a clone after it is
            # host work the device stayed held for (32 MiB: 9 ms on the 2-CPU machine)
            saved = [t.detach().to("cpu", copy=True) for t in outputs]
            del outputs
        state = model_buffers.reported(guarded.model, job.buffer_names)
        if not share:  # on the host now: the file is written off the device lock
            synchronize(job.device)
            channel.host_work(job.device)
        torch.save({"outputs": saved, "buffers": state}, trial_path(outputs_path, pos))
        del saved, state
        # the parent says `next` as it starts comparing a held reference's trial, or, where
        # the reference streams, once the oracle has made and compared its trial (trial_check);
        # `ahead` as its oracle starts comparing a held one's shared trial (oracle_held.py)
        channel.send("trial", pos=pos)
        command = timed_runs.read_command()
        if command not in (["next"], ["ahead"]):
            raise CandidateFailure("INFRA_ERROR", "verification ended by the parent")
        # shared ones are let go only once the oracle has compared them: now at `next`, at
        # the next trial's command after `ahead` (the parent asks only once it has the verdict)
        compared = outputs if command == ["ahead"] else None
        outputs = None
    del compared
    return largest


def run_ncu(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.profile_child import run_ncu as run

    run(job, channel)


def run_reference(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.reference_child import run_reference as run

    run(job, channel)


def run_oracle(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.reference_child import run_oracle as run

    run(job, channel)


def run_baselines(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.baseline_child import run_baselines as run

    run(job, channel)


MODES_OOM = ("candidate", "reference", "oracle")  # their out-of-memory: a `fail` event
MODES = {
    "candidate": run_candidate,
    "reference": run_reference,
    "baseline": run_baselines,
    "ncu": run_ncu,
    "oracle": run_oracle,
}


def limit_memory(job: Job) -> None:
    """On CPU, large allocations fail cleanly past the limit (the parent also watches RSS).
    The reference's child, which runs no candidate, may raise its own to the footprint's
    (reference_footprint): its hard limit is the most any child may have."""
    if job.memory_limit_mb and job.device == "cpu":
        limit = job.memory_limit_mb * 2**20
        hard = max(limit, footprint.cap_mb() * 2**20) if job.mode == "reference" else limit
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def main(argv: list[str]) -> int:
    if argv[1] == "--zygote":  # forks spares (zygote.py), each goes on as --standby does
        device = argv[2]

        def warm() -> None:
            with fork_safe_cuda_check():
                warm_up(device, context=False)  # on the CPU: under its lock

        unfit = functools.partial(fork_unfit, device)
        return zygote.serve(int(argv[3]), warm, lambda fd: spare(device, fd), unfit)
    if argv[1] == "--standby":
        return spare(argv[2], int(argv[3]))
    return run(argv[1], int(argv[2]))


def spare(device: str, fd: int) -> int:
    job_path = standby(device, fd)
    return run(job_path, fd) if job_path else 0


def run(job_path: str, fd: int) -> int:
    job = Job.load(job_path)
    channel = Channel(fd, job.mode)
    name_self(child_name(job.mode, "start"))
    if job.mode in ("candidate", "ncu"):
        # the bytecode cache (PYTHONPYCACHEPREFIX) is every child's: only what was imported
        # before a candidate's code could run (a spare's warm-up, trusted children) goes there
        sys.dont_write_bytecode = True
        if job.device.startswith("cuda"):  # the driver opens its devices before Landlock:
            import torch  # after it, CUDA's initialization fails (error 304, on the H100)

            torch.cuda.init()
        guards.drop_privileges()
        hidden = (str(private_dir(cache_dir())),)  # the evaluators' key: cache_seal.py
        if not confine_child(job.mode, job.writable, channel.send, hidden=hidden):  # it said why
            channel.send("done")
            return 0
    limit_memory(job)
    channel.stage("setup")
    import torch

    channel.send(
        "info",
        device_name=torch.cuda.get_device_name(0) if job.device.startswith("cuda") else "cpu",
        torch_version=torch.__version__,
    )
    try:
        if folder := os.environ.get(PROFILE_ENV):  # a harness developer's question
            profiled(MODES[job.mode], job, channel, folder)
        else:
            MODES[job.mode](job, channel)
    except CandidateFailure as failure:
        channel.send("fail", status=failure.status, message=str(failure), **failure.fields)
    except Exception as exc:
        if not out_of_memory.device_oom(exc) or job.mode not in MODES_OOM:
            raise
        channel.send("fail", **out_of_memory.failure(job.mode, exc))
    channel.send("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
