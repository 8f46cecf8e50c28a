"""What every evaluator child does with a model (worker.py's candidate, the reference's child
and oracle, the baselines' child, profiles): build it under guards, run and synchronize it,
time it. Their common ground, so that none of them imports another's entry point."""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import (
    guards,
    native_audit,
    out_of_memory,
    timed_runs,
)
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator.build import BuildError, cache_cpp_builds, load_candidate_class
from kforge_search.evaluator.child_failure import CandidateFailure, rejected
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.timing import METHODS, Clocks


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
