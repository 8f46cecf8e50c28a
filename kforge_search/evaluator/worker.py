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
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import buffers as model_buffers
from kforge_search.evaluator import (
    compiling,
    footprint,
    guards,
    native_audit,
    out_of_memory,
    shared_outputs,
    timed_runs,
    zygote,
)
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator.build import BuildError, cache_cpp_builds, load_candidate_class
from kforge_search.evaluator.cache_seal import private_dir
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.child_failure import CandidateFailure, rejected
from kforge_search.evaluator.job import PROFILE_ENV, Job, trial_path
from kforge_search.evaluator.landlock import confine_child
from kforge_search.evaluator.phases import profiled
from kforge_search.evaluator.standby import fork_safe_cuda_check, fork_unfit, standby, warm_up
from kforge_search.evaluator.timing import METHODS, Clocks, capture_clocks
from kforge_search.paths import cache_dir
from kforge_search.problem import exec_problem
from kforge_search.procs.cpu_parts import child_name, name_self


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def as_output_list(out: Any, device: str) -> list[Any]:
    """Outputs as a list of plain dense tensors on the platform's device, else rejected."""
    import torch

    items = list(out) if isinstance(out, list | tuple) else [out]
    for i, item in enumerate(items):
        if type(item) is not torch.Tensor or item.layout is not torch.strided:
            kind = type(item).__name__
            layout = f" with layout {item.layout}" if isinstance(item, torch.Tensor) else ""
            raise rejected(
                "dynamic:output-type",
                f"output {i} is a {kind}{layout}: forward must return plain dense torch.Tensor",
            )
        if item.device.type != torch.device(device).type:
            raise rejected(
                "dynamic:output-device",
                f"output {i} is on {item.device}, not on the platform's device {device}",
            )
    return items


def same_values(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(
            torch.nan_to_num(a), torch.nan_to_num(b)
        )
    return True


def build_model(cls: type, module: Any, job: Job) -> Any:
    """cls(*get_init_inputs()) on the job's device, its parameters drawn there (the
    reference's and every candidate's alike: inputs.on_device)."""

    def make() -> Any:
        return cls(*module.get_init_inputs())

    return job_inputs.drawn(make, job.device, job.seed).to(job.device)


def poison_free_memory(device: str) -> None:
    """On CUDA, fill memory the caching allocator will hand out next with NaN."""
    import torch

    if device.startswith("cuda"):
        block = torch.empty(64 * 2**20, dtype=torch.float32, device=device)
        block.fill_(float("nan"))
        del block


class Guarded:
    """The candidate's model with every defence around its forward calls."""

    def __init__(
        self,
        job: Job,
        cls: type,
        model: Any,
        counter: guards.LaunchCounter,
        world: guards.WorldGuard,
        integrity: guards.Integrity,
        native: native_audit.NativeAudit | None = None,
    ):
        self.job, self.cls, self.model, self.counter = job, cls, model, counter
        self.world, self.integrity, self.native = world, integrity, native

    def check_harness(self) -> None:
        changed = self.integrity.changed()
        if changed:
            raise rejected(
                "dynamic:harness-patched",
                f"the candidate rebound functions the harness relies on: {', '.join(changed[:5])}",
            )

    def check_world(self) -> None:
        if self.world.violations:
            reason, what = self.world.violations[0]
            raise rejected(reason, f"the candidate tried {what}: kernels must not touch the world")
        native_failure(self.native)

    def forward(self, inputs: list[Any], trial: int) -> list[Any]:
        import torch

        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        threads, sockets = guards.python_threads(), guards.open_sockets()
        reaped, spawns = guards.reaped_children_activity(), self.world.spawns
        poison_free_memory(self.job.device)
        self.counter.count = 0
        recorder = guards.OpRecorder()
        try:
            with torch.no_grad(), recorder:
                out = self.model(*inputs)
        except Exception as exc:
            self.check_world()
            detail = str(exc) or f"over the memory limit of {self.job.memory_limit_mb} MiB"
            raise CandidateFailure(
                "RUNTIME_ERROR",
                f"forward raised {type(exc).__name__} in trial {trial}: {detail}",
                traceback=traceback.format_exc(),
                reasons=out_of_memory.busy_reasons(exc),
            ) from exc
        launches = self.counter.count
        outputs = as_output_list(out, self.job.device)
        snapshot = [o.clone() for o in outputs]  # ordered after the forward's own stream only
        synchronize(self.job.device)
        time.sleep(0.02)
        self.check_world()
        if recorder.forbidden:
            ops = ", ".join(f"aten.{k} x{v}" for k, v in sorted(recorder.forbidden.items()))
            raise rejected(
                "dynamic:torch-fallback",
                f"forward ran PyTorch compute operators ({ops}): only allocation, views and "
                "copies are allowed besides your own kernels",
            )
        if launches == 0:
            raise rejected(
                "dynamic:no-kernel-launch",
                "forward launched none of the candidate's kernels: launch them",
            )
        if guards.python_threads() - threads:
            raise rejected(
                "dynamic:background-thread", "forward left a thread running after it returned"
            )
        native_spawn = guards.reaped_children_activity() > reaped and self.world.spawns == spawns
        if guards.child_processes() or native_spawn:
            raise rejected(
                "dynamic:spawned-process", "forward started a process (from native code?)"
            )
        if guards.open_sockets() > sockets:
            raise rejected("sandbox:socket", "forward opened a socket")
        if not all(same_values(a, b) for a, b in zip(outputs, snapshot, strict=True)):
            raise rejected(
                "dynamic:output-changed-after-return",
                "outputs changed after forward returned: work ran on another stream or thread "
                "without being waited for",
            )
        mutated = [
            i
            for i, (x, y) in enumerate(zip(inputs, originals, strict=True))
            if not same_values(x, y)
        ]
        if mutated:
            raise rejected(
                "dynamic:input-mutated",
                f"forward modified its input(s) {mutated}: inputs must be left unchanged",
            )
        return outputs


def load_guarded(job: Job, module: Any, clocks: Clocks | None = None) -> Guarded:
    from kforge_search.evaluator import pyaudit, seal

    integrity = seal.harness_seal(clocks)  # before any candidate code runs
    counter = guards.LaunchCounter()
    counter.install_triton()
    # built extensions are held against the allowlist of native imports (native_audit.py)
    native = native_audit.NativeAudit((job.ext_cache, str(Path(job.outputs_path).parent)))
    cache_cpp_builds(Path(job.ext_cache), counter.wrap_extension, native)
    world = guards.WorldGuard(job.writable)
    world.install()
    if job.python_audit:  # no frames, heap, ctypes or code for the candidate (pyaudit.py)
        pyaudit.install(world.violations, job.candidate_path)
    try:
        cls = load_candidate_class(job.candidate_path)
    except BuildError as exc:
        world_failure(world, native)
        raise CandidateFailure(
            "COMPILE_ERROR", str(exc), compile_log=exc.log, traceback=traceback.format_exc()
        ) from exc
    native_failure(native)
    model = build_guarded_model(cls, module, job, world, native)
    return Guarded(job, cls, model, counter, world, integrity, native)


def build_guarded_model(
    cls: type,
    module: Any,
    job: Job,
    world: guards.WorldGuard,
    native: native_audit.NativeAudit | None = None,
) -> Any:
    """ModelNew(*get_init_inputs()) on the platform's device; a failure is a COMPILE_ERROR."""
    try:
        return build_model(cls, module, job)
    except BuildError as exc:
        world_failure(world, native)
        raise CandidateFailure(
            "COMPILE_ERROR", str(exc), compile_log=exc.log, traceback=traceback.format_exc()
        ) from exc
    except Exception as exc:
        world_failure(world, native)
        raise CandidateFailure(
            "COMPILE_ERROR",
            f"ModelNew(*get_init_inputs()) failed: {type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        ) from exc


def world_failure(world: guards.WorldGuard, native: native_audit.NativeAudit | None = None) -> None:
    if world.violations:
        reason, what = world.violations[0]
        raise rejected(reason, f"the candidate tried {what} while being built")
    native_failure(native)


def native_failure(native: native_audit.NativeAudit | None) -> None:
    """REJECTED when an extension of the candidate's (built, or mapped from its folders)
    imports library compute."""
    if native is None:
        return
    native.sweep()
    if message := native.message():
        raise rejected(native_audit.REASON, message)


def forward_failed(guarded: Guarded, exc: Exception, where: str) -> CandidateFailure:
    """RUNTIME_ERROR for a forward that raised `where` ("while being timed"), after the
    world guard's check (a refused operation is the candidate's rejection, not this)."""
    guarded.check_world()
    return CandidateFailure(
        "RUNTIME_ERROR",
        f"forward raised {type(exc).__name__} {where}: {exc}",
        traceback=traceback.format_exc(),
        reasons=out_of_memory.busy_reasons(exc),
    )


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
        timed_runs.save_chosen(path, kept, burst, chosen_runs, chosen_calls, job.share_outputs)
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
    until `next`. Returns the bytes of one trial's outputs."""
    import torch

    largest = 0
    for pos, trial in enumerate(kept):  # one trial in memory at a time: a file of its own
        outputs = guarded.forward(job_inputs.make_inputs(module, job, trial), trial)
        largest = max(largest, timed_runs.output_bytes(outputs))
        if share:
            synchronize(job.device)
            saved = shared_outputs.share(list(outputs))
        else:
            saved = [t.detach().to("cpu").clone() for t in outputs]
            del outputs
        state = model_buffers.reported(guarded.model, job.buffer_names)
        torch.save({"outputs": saved, "buffers": state}, trial_path(outputs_path, pos))
        del saved, state
        # the parent reads it (and only then has the reference's trial made, where the
        # reference streams: pipeline.TrialCheck) before the next trial's forward runs
        channel.send("trial", pos=pos)
        if timed_runs.read_command() != ["next"]:
            raise CandidateFailure("INFRA_ERROR", "verification ended by the parent")
        outputs = None  # shared ones are let go only now: the oracle has compared them
    return largest


def run_ncu(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.profile_child import run_ncu as run

    run(job, channel)


def time_model(
    model: Any,
    module: Any,
    job: Job,
    clocks: Clocks,
    draw: int | None = None,
    keep_budget: int = 0,
    per_run_bytes: int = 0,
) -> tuple[Any, list[list[Any]]]:
    """Timed runs, each on fresh inputs copied into the same buffers outside the timed region
    (a candidate's seeded by the parent's draw). With a budget, the whole outputs of every
    timed run are kept (copied after the run, outside the timed region) for the parent to
    check after the fact; runs whose outputs would not all fit are not made."""
    import torch

    runs = job.timed_runs
    if keep_budget:
        runs = timed_runs.affordable_runs(runs, per_run_bytes, keep_budget)
    buffers = job_inputs.timing_inputs(module, job, 0, draw)
    last: list[Any] = [None]
    kept: list[list[Any]] = []

    def refresh(run: int) -> None:
        fresh_inputs = job_inputs.timing_inputs(module, job, run, draw)
        for buffer, fresh in zip(buffers, fresh_inputs, strict=True):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(fresh)

    def record(run: int) -> None:
        if keep_budget:
            kept.append([t.detach().clone() for t in timed_runs.as_list(last[0])])

    def call() -> None:
        last[0] = model(*buffers)

    method = METHODS[job.timing_method]
    with torch.no_grad():
        stats = method(call, clocks, job.warmup, runs, refresh, record)
    if not job.timing_meaningful:
        stats = replace(stats, meaningful=False)
    return stats, kept


def run_reference(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.reference_child import run_reference as run

    run(job, channel)


def run_oracle(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.reference_child import run_oracle as run

    run(job, channel)


def run_baselines(job: Job, channel: Channel) -> None:
    from kforge_search.evaluator.baseline_child import run_baselines as run

    run(job, channel)


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
    except torch.OutOfMemoryError as exc:
        if job.mode not in ("candidate", "reference", "oracle"):
            raise
        channel.send("fail", **out_of_memory.failure(job.mode, exc))
    channel.send("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
