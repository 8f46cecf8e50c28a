"""The evaluator's child process: `python -m kforge_search.evaluator.worker JOB.json EVENT_FD`.

It runs one job (a candidate, the reference, or the baselines) and reports to the parent as
JSON lines on EVENT_FD. The parent owns every decision about status: it enforces the time,
memory and output limits, compares outputs, and kills this process when it must.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kforge_search.evaluator.build import BuildError, cache_cpp_builds, load_candidate_class
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.timing import METHODS
from kforge_search.problem import exec_problem


class Channel:
    """JSON lines to the parent on a dedicated pipe (stdout is the candidate's)."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "w", buffering=1)

    def send(self, event_type: str, /, **fields: Any) -> None:
        self._file.write(json.dumps({"type": event_type, **fields}, default=str) + "\n")
        self._file.flush()

    def stage(self, name: str) -> None:
        self.send("stage", stage=name)

    def fail(self, status: str, message: str, **fields: Any) -> None:
        self.send("fail", status=status, message=message, **fields)


class CandidateFailure(Exception):
    def __init__(self, status: str, message: str, **fields: Any):
        super().__init__(message)
        self.status = status
        self.fields = fields


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


def make_inputs(module: Any, job: Job, trial: int) -> list[Any]:
    seed_everything(job.trial_seed(trial))
    return list(to_device(module.get_inputs(), job.device))


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def as_output_list(out: Any) -> list[Any]:
    """Outputs as a list of plain dense tensors; anything else is rejected."""
    import torch

    items = list(out) if isinstance(out, list | tuple) else [out]
    for i, item in enumerate(items):
        if type(item) is not torch.Tensor or item.layout is not torch.strided:
            raise CandidateFailure(
                "REJECTED",
                f"output {i} is a {type(item).__name__}"
                + (f" with layout {item.layout}" if isinstance(item, torch.Tensor) else "")
                + ": forward must return plain dense torch.Tensor values",
                reasons=["dynamic:output-type"],
            )
    return items


def same_values(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
            and torch.equal(a.isnan(), b.isnan())
        )
    return True


def run_forward(model: Any, inputs: list[Any], job: Job) -> list[Any]:
    import torch

    with torch.no_grad():
        out = model(*inputs)
    synchronize(job.device)
    return as_output_list(out)


def build_model(cls: type, module: Any, job: Job) -> Any:
    seed_everything(job.seed)
    init_inputs = module.get_init_inputs()
    return cls(*init_inputs).to(job.device)


def run_candidate(job: Job, channel: Channel) -> None:
    import torch

    channel.stage("build")
    module = exec_problem(job.problem)
    cache_cpp_builds(Path(job.ext_cache))
    try:
        cls = load_candidate_class(job.candidate_path)
        model = build_model(cls, module, job)
    except BuildError as exc:
        raise CandidateFailure(
            "COMPILE_ERROR", str(exc), compile_log=exc.log, traceback=traceback.format_exc()
        ) from exc
    except Exception as exc:
        raise CandidateFailure(
            "COMPILE_ERROR",
            f"ModelNew(*get_init_inputs()) failed: {type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        ) from exc

    channel.stage("verify")
    trials = []
    for trial in range(job.trials):
        inputs = make_inputs(module, job, trial)
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        try:
            outputs = run_forward(model, inputs, job)
        except CandidateFailure:
            raise
        except Exception as exc:
            raise CandidateFailure(
                "RUNTIME_ERROR",
                f"forward raised {type(exc).__name__} in trial {trial}: {exc}",
                traceback=traceback.format_exc(),
            ) from exc
        mutated = [
            i
            for i, (x, y) in enumerate(zip(inputs, originals, strict=False))
            if not same_values(x, y)
        ]
        if mutated:
            raise CandidateFailure(
                "REJECTED",
                f"forward modified its input(s) {mutated}: inputs must be left unchanged",
                reasons=["dynamic:input-mutated"],
            )
        trials.append([t.detach().to("cpu").clone() for t in outputs])
    torch.save(trials, job.outputs_path)
    del trials
    channel.send("verified")
    if sys.stdin.readline().strip() != "time":
        return

    channel.stage("time")
    inputs = make_inputs(module, job, 0)
    try:
        stats = time_model(model, inputs, job)
    except Exception as exc:
        raise CandidateFailure(
            "RUNTIME_ERROR",
            f"forward raised {type(exc).__name__} while being timed: {exc}",
            traceback=traceback.format_exc(),
        ) from exc
    channel.send("timing", timing=asdict(stats))


def time_model(model: Any, inputs: list[Any], job: Job) -> Any:
    import torch

    method = METHODS[job.timing_method]
    with torch.no_grad():
        stats = method(lambda: model(*inputs), job.device, job.warmup, job.timed_runs)
    if not job.timing_meaningful:
        stats = type(stats)(**{**asdict(stats), "meaningful": False})
    return stats


def run_reference(job: Job, channel: Channel) -> None:
    import torch

    channel.stage("reference")
    module = exec_problem(job.problem)
    model = build_model(module.Model, module, job)
    trials = [
        [t.detach().to("cpu").clone() for t in run_forward(model, make_inputs(module, job, i), job)]
        for i in range(job.trials)
    ]
    again = run_forward(build_model(module.Model, module, job), make_inputs(module, job, 0), job)
    for first, second in zip(trials[0], again, strict=False):
        if not torch.allclose(first, second.to("cpu"), rtol=1e-5, atol=1e-6, equal_nan=True):
            raise CandidateFailure(
                "PROBLEM_ERROR",
                "the reference is nondeterministic under a fixed seed: two runs of trial 0 "
                "differ. Seed or remove the randomness in Model.forward (e.g. dropout), "
                "or use deterministic ops.",
            )
    warnings = []
    if len(trials) > 1 and all(
        torch.equal(a, b) for a, b in zip(trials[0], trials[1], strict=True)
    ):
        warnings.append(
            "degenerate problem: the reference output does not depend on its inputs "
            "(two different input seeds gave identical outputs)"
        )
    elif any(t.numel() > 1 and bool((t == t.flatten()[0]).all()) for t in trials[0]):
        warnings.append("degenerate problem: a reference output is constant")
    torch.save(trials, job.outputs_path)
    channel.send("reference", warnings=warnings)


def run_baselines(job: Job, channel: Channel) -> None:
    import torch

    module = exec_problem(job.problem)
    inputs = make_inputs(module, job, 0)
    for kind in job.baseline_kinds:
        channel.stage(f"baseline-{kind}")
        model = build_model(module.Model, module, job)
        fn = torch.compile(model) if kind == "compile" else model
        try:
            stats = time_model(fn, inputs, job)
        except Exception as exc:
            channel.send("baseline", kind=kind, ok=False, error=f"{type(exc).__name__}: {exc}")
            continue
        channel.send("baseline", kind=kind, ok=True, timing=asdict(stats))


MODES = {"candidate": run_candidate, "reference": run_reference, "baseline": run_baselines}


def limit_memory(job: Job) -> None:
    """On CPU, large allocations fail cleanly past the limit (the parent also watches RSS)."""
    if job.memory_limit_mb and job.device == "cpu":
        limit = job.memory_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def main(argv: list[str]) -> int:
    job = Job.load(argv[1])
    channel = Channel(int(argv[2]))
    limit_memory(job)
    channel.stage("setup")
    import torch

    channel.send(
        "info",
        device_name=torch.cuda.get_device_name(0) if job.device.startswith("cuda") else "cpu",
        torch_version=torch.__version__,
    )
    try:
        MODES[job.mode](job, channel)
    except CandidateFailure as failure:
        channel.fail(failure.status, str(failure), **failure.fields)
    channel.send("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
