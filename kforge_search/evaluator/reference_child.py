"""The reference's child and its oracle (worker.py's modes "reference" and "oracle"): the
problem's footprint, its trials kept whole (reference_trials) or streamed one at a time
(streamed_reference_trials, replay), its float64 run, its time per call; then, in the same
process that never loads a candidate, the oracle that answers for a candidate's timed runs
and compares a candidate against a streamed reference (serve_oracle, serve_compared_trials,
serve_compared_runs: oracle_compare.py).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kforge_search.evaluator import buffers as model_buffers
from kforge_search.evaluator import exact, footprint, tensorfile
from kforge_search.evaluator import inputs as job_inputs
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.child_failure import CandidateFailure
from kforge_search.evaluator.job import Job
from kforge_search.evaluator.limits import measure_per_call
from kforge_search.evaluator.model_run import build_model, synchronize
from kforge_search.evaluator.oracle_compare import (
    RunSpec,
    TrialSpec,
    candidate_outputs,
    compare_device,
    compare_run,
    compare_trial,
    labels,
    load,
)
from kforge_search.evaluator.oracle_held import HeldTrials, serve_held_trials
from kforge_search.evaluator.out_of_memory import crowded_device, device_oom
from kforge_search.evaluator.phases import PhaseClock
from kforge_search.evaluator.verify import all_close, magnitude
from kforge_search.problem import exec_problem

# what a streamed trial holds on the device at once, at its float64 run's peak: trial 0's and
# the trial's float32 outputs, its float32 inputs, their float64 copies (twice the size), the
# float64 outputs, the parameters in both dtypes: 3 x inputs + 4 x outputs + 3 x parameters;
# with this much room to spare (the allocator's rounding, a comparison's piece). 8 x (inputs +
# outputs + parameters) kept a 4096 x 393216 elementwise reference (45 GiB at its peak) off
# an idle H100's 80 GiB, and on the host it takes minutes
DEVICE_TRIAL_SLACK = 1.5


def reference_footprint(job: Job, module: Any, channel: Channel) -> footprint.Footprint | None:
    """The problem's footprint (footprint.py), told to the parent (which scales this child's
    memory limit to it; on the CPU the child raises its own RLIMIT_DATA to match), or a
    PROBLEM_ERROR where the machine or the device cannot hold its evaluation."""
    import torch

    fp = footprint.measure(module)
    if isinstance(fp, str):
        channel.send("footprint", footprint=None, why=fp)
        return None
    channel.send("footprint", footprint=fp.as_dict())
    stream = footprint.streamed(fp, job.total_trials, job.reference_keep_bytes)
    if why := footprint.shortfall(job.problem, fp, job.device, job.total_trials, stream):
        raise CandidateFailure("PROBLEM_ERROR", why)
    if job.device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info()
        if why := footprint.device_shortfall(job.problem, fp, free, total):
            raise CandidateFailure("PROBLEM_ERROR", why, busy=fp.call_bytes <= total)
    limit = footprint.limit_mb(
        job.memory_limit_mb, fp, job.mode, job.device, job.total_trials, stream
    )
    if job.device == "cpu" and limit > job.memory_limit_mb:
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        soft = limit * 2**20 if hard == resource.RLIM_INFINITY else min(limit * 2**20, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return fp


def out_of_memory(exc: BaseException) -> str:
    """ "device" or "host" where `exc` says an allocation failed there, else ""."""
    if device_oom(exc):
        return "device"
    if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
        return "host"
    return ""


def run_reference(job: Job, channel: Channel) -> None:
    channel.stage("reference")
    started = time.perf_counter()
    module = exec_problem(job.problem)
    fp = reference_footprint(job, module, channel)
    streamed = fp is not None and footprint.streamed(fp, job.total_trials, job.reference_keep_bytes)
    spent = PhaseClock()  # where the time went, by part: the "reference" event's
    spent.add("setup", time.perf_counter() - started)
    try:
        if streamed:
            streamed_reference_trials(job, module, channel, fp, spent)
        else:
            reference_trials(job, module, channel, spent)
    except Exception as exc:
        if not (where := out_of_memory(exc)):
            raise
        busy = where == "device" and fp is not None and busy_device(fp)
        raise CandidateFailure(
            "PROBLEM_ERROR",
            footprint.out_of_memory(job.problem, fp, where, exc),
            traceback=traceback.format_exc(),
            busy=busy,
        ) from exc


def busy_device(fp: footprint.Footprint) -> bool:
    """Whether an out-of-memory on the device may be other processes' doing: they hold a
    quarter of it or more, and one call's data fits in its total."""
    import torch

    _, total = torch.cuda.mem_get_info()
    return fp.call_bytes <= total and crowded_device()


def reference_trials(job: Job, module: Any, channel: Channel, spent: PhaseClock) -> None:
    """The reference's trials, its float64 run and its time per call, saved for the parent;
    then, its lists let go, it serves as the oracle (serve_oracle)."""
    model = build_model(module.Model, module, job)
    forward = model_forward(model, job.device)
    trials, states = [], []  # each trial's outputs, and the buffers its forward changed
    sizes: list[list[float]] = []  # each trial's outputs' sizes (Numerics.magnitudes)
    failed: dict[int, str] = {}  # wide-range trials whose forward raised
    started = time.perf_counter()
    for i in range(job.total_trials):
        if i:
            channel.safe_point()
        before = model_buffers.snapshot(model)
        try:
            outputs = forward(job_inputs.make_inputs(module, job, i))
        except Exception as exc:
            if i < job.first_wide_trial:
                raise
            failed[i], outputs = f"{type(exc).__name__}: {exc}"[:200], []
        sizes.append([magnitude(t) for t in outputs])  # on the device, for every evaluator
        trials.append([t.detach().to("cpu").clone() for t in outputs])
        states.append(model_buffers.changed(model, before))
    float32_s = time.perf_counter() - started
    spent.add("float32 trials", float32_s)
    kept = exact.drop_nonfinite(trials, states, job.first_wide_trial, failed, job.trials)
    # a model built again (the first one let go): the determinism check, then the time per
    # call and the oracle
    del model, forward
    with spent.timed("determinism"):
        forward = model_forward(build_model(module.Model, module, job), job.device)
        again = forward(job_inputs.make_inputs(module, job, 0))
        check_deterministic(trials[0], again)
        del again  # its device memory goes before the float64 run
    warnings = degeneracy_warnings(trials)
    with spent.timed("float64"):
        float64, why, error = exact.float64_run(
            build_model(module.Model, module, job),
            lambda t: job_inputs.make_inputs(module, job, t),
            job.total_trials,
            kept.trial_ids,
            trials,
            job.device,
            float32_s,
            kept.plain,
        )
    warnings += [*kept.notes, *filter(None, [why])]
    with spent.timed("time per call"):
        per_call_ms = measure_per_call(forward, module, job)
    saved = {
        "outputs": [trials[t] for t in kept.trial_ids],
        "buffers": [states[t] for t in kept.trial_ids],
        "exact": float64,
    }
    with spent.timed("file"):
        tensorfile.write(saved, Path(job.outputs_path))  # the parent's views of one read
    # the parent loads what was saved: this child lets go of its copy first (the oracle it
    # becomes would hold every trial's outputs and their float64 copies while it waits)
    del trials, states, float64, saved
    gc.collect()
    channel.send(
        "reference",
        warnings=warnings,
        per_call_ms=per_call_ms,
        trials=asdict(kept),
        float32_error=error,
        magnitudes=[sizes[t] for t in kept.trial_ids],
        spent=spent.phases(),
    )
    serve_oracle(forward, module, job, channel)


def serve_oracle(
    forward: Callable[[list[Any]], list[Any]], module: Any, job: Job, channel: Channel
) -> None:
    """The reference's outputs for a candidate's timed runs, on request, in this process
    that never loads a candidate: `runs DRAW R...` answers with the outputs of timed runs
    R under the parent's draw (evaluator/oracle.py); `compare-trials SPEC` compares a
    candidate's verification trials one at a time (a streamed reference's:
    serve_compared_trials; a held one's, kept here once sent: oracle_held.py) and
    `compare-runs SPEC` its chosen timed runs (serve_compared_runs); until stdin closes or
    says `stop`. Between requests it holds no memory its allocator cached (let_go) beside
    a held reference's trials."""
    asked = 0
    held: dict[str, HeldTrials] = {}  # a held reference's trials, once the parent sent them
    let_go(job.device)  # what the reference's own stage cached
    while (line := sys.stdin.readline()).split()[:1] in VERBS:
        verb, _, rest = line.strip().partition(" ")
        if verb == "end":  # a stream the parent ends after it ended here
            continue
        channel.stage("oracle")
        if verb == "compare-trials" and (spec := TrialSpec(**json.loads(rest))).held:
            serve_held_trials(job.device, channel, spec, held)
        elif verb == "compare-trials":
            serve_compared_trials(module, job, channel, spec)
        elif verb == "compare-runs":
            serve_compared_runs(forward, module, job, channel, RunSpec(**json.loads(rest)))
        else:
            asked += 1
            serve_runs(forward, module, job, channel, rest.split(), asked)
        let_go(job.device)


def serve_runs(
    forward: Callable[[list[Any]], list[Any]],
    module: Any,
    job: Job,
    channel: Channel,
    command: list[str],
    asked: int,
) -> None:
    """`runs DRAW R...`: the reference's outputs of timed runs R under the draw, saved for
    the parent (its `asked`-th answer's file)."""
    import torch

    draw = int(command[0])
    runs = [int(x) for x in command[1:]]
    inputs = (job_inputs.timing_inputs(module, job, r, draw) for r in runs)
    outputs = [[t.detach().to("cpu").clone() for t in forward(x)] for x in inputs]
    channel.host_work(job.device)  # the file is written off the device lock
    path = f"{job.outputs_path}.oracle-{asked}"
    torch.save(outputs, path)
    channel.send("oracle", path=path)


def let_go(device: str) -> None:
    """An idle oracle keeps no device memory its allocator cached for the last request
    (H200, level 1: a bench's idle oracles left 1.6 of 140 GiB free); so the room it
    measures before it compares (oracle_compare.compare_device) is all it could have (a
    second candidate's 6 GiB trials of 21_Sigmoid had gone to the host, then past the
    oracle's time limit, with the first's cached)."""
    if device.startswith("cuda"):
        import torch

        gc.collect()
        torch.cuda.empty_cache()


VERBS = (["runs"], ["compare-trials"], ["compare-runs"], ["end"])


def run_oracle(job: Job, channel: Channel) -> None:
    """An oracle on its own (the reference's child that served one has ended): the
    reference's model, built as the reference's child builds it, answering requests."""

    channel.stage("reference")
    module = exec_problem(job.problem)
    forward = model_forward(build_model(module.Model, module, job), job.device)
    channel.send("oracle-ready")
    serve_oracle(forward, module, job, channel)


def model_forward(model: Any, device: str) -> Callable[[list[Any]], list[Any]]:
    import torch

    def forward(inputs: list[Any]) -> list[Any]:
        with torch.no_grad():
            out = model(*inputs)
        synchronize(device)
        return list(out) if isinstance(out, list | tuple) else [out]

    return forward


@dataclass(frozen=True)
class Replayed:
    """One trial of a streamed reference (replay)."""

    trial: int
    outputs: list[Any]  # float32 run's, on the CPU
    raised: str  # why its forward raised ("" where it did not: only a wide-range trial may)
    exact: list[Any]  # the float64 run's outputs, on the device (empty: none)
    why64: str  # why there is no float64 run (from this trial on)
    changed: dict[str, Any]  # the buffers its forward changed
    float32_s: float
    float64_s: float


def replay(module: Any, job: Job, float64: bool, on_device: bool = False) -> Iterator[Replayed]:
    """The reference's trials in order from fresh models, as its child first ran them:
    every one (a dropped wide-range trial too: training-mode state follows them), with
    `float64` the float64 run's beside them in lockstep (the model built again, `.double()`,
    the same inputs in float64: exact.float64_step). One trial at a time: a streamed
    reference (its child, its oracle) holds no more. `on_device`: the outputs stay on the
    job's device (the reference's child reads from them what the parent needs there)."""
    import torch

    model = build_model(module.Model, module, job)
    forward = model_forward(model, job.device)
    double: Any = None
    why64 = "" if float64 else "numerics: no float64 run asked"
    if float64:
        try:
            double = build_model(module.Model, module, job).double()
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            why64 = "numerics: no float64 reference: the model does not run in float64 "
            why64 += f"({type(exc).__name__}: {first})"
    for t in range(job.total_trials):
        before = model_buffers.snapshot(model)
        raised, outputs = "", []
        started = time.perf_counter()
        try:
            outputs = forward(job_inputs.make_inputs(module, job, t))
        except Exception as exc:
            if t < job.first_wide_trial:
                raise
            raised = f"{type(exc).__name__}: {exc}"[:200]
        saved = [o.detach().clone() if on_device else o.detach().to("cpu").clone()
                 for o in outputs]  # fmt: skip
        del outputs
        changed = model_buffers.changed(model, before)
        middle = time.perf_counter()
        exact_outs: list[Any] = []
        if double is not None and not why64:
            exact_outs, why64 = exact.float64_step(
                double, job_inputs.make_inputs(module, job, t), job.device
            )
        synchronize(job.device)
        ended = time.perf_counter()
        yield Replayed(t, saved, raised, exact_outs, why64, changed, middle - started,
                       ended - middle)  # fmt: skip
        del saved, exact_outs
        if job.device.startswith("cuda"):
            torch.cuda.empty_cache()


def float64_row(outputs: list[Any], exact_outs: list[Any], where: str = "cpu") -> list[Any] | str:
    """Per output, the float64 output (on `where`) of a float32 one, else None; or why the
    float64 run's outputs cannot be the reference's."""
    import torch

    if [tuple(o.shape) for o in outputs] != [tuple(x.shape) for x in exact_outs]:
        return "numerics: no float64 reference: the float64 run's outputs differ in number or shape"
    return [x.detach().double().to(where) if o.dtype == torch.float32 else None
            for o, x in zip(outputs, exact_outs, strict=True)]  # fmt: skip


def stays_on_device(job: Job, fp: footprint.Footprint | None) -> bool:
    """Whether a streamed reference's trials stay on its accelerator while its child reads
    them (their sizes, the float32 error, the determinism check): where the device has room
    for trial 0's outputs beside a trial's float32 and float64 runs. On the host those reads
    of a 6 GiB output took tens of seconds per trial, and a published-size level-1 reference
    (4096 x 393216) exceeded its stage's 300 s on the H200."""
    import torch

    if not job.device.startswith("cuda") or fp is None:
        return False
    free, _ = torch.cuda.mem_get_info()
    peak = 3 * fp.inputs + 4 * fp.outputs + 3 * fp.params
    return free > DEVICE_TRIAL_SLACK * peak


def streamed_reference_trials(
    job: Job, module: Any, channel: Channel, fp: footprint.Footprint | None, spent: PhaseClock
) -> None:
    """reference_trials for a problem whose trials' outputs and float64 copies do not all
    fit (footprint.streamed): the float32 and float64 runs go in lockstep (replay), and
    what the parent needs of the outputs is taken one trial at a time: which trials are
    kept, each output's size per trial (verify.atol_scales), the float32 reference's
    distance to the float64 one (Numerics.float32_error); the trials themselves are
    recomputed by the oracle, one at a time, when a candidate is compared
    (serve_compared_trials).
    The same checks as reference_trials: nonfinite wide-range trials dropped, determinism,
    degeneracy, the float64 run's limits (exact.FLOAT64_BUDGET)."""
    import torch

    from kforge_search.evaluator.verify import largest_difference

    walk_started = time.perf_counter()
    kept = exact.Kept([], [], plain=list(range(min(job.trials, job.first_wide_trial))))
    states: list[dict[str, Any]] = []
    magnitudes: list[list[float]] = []
    warnings: list[str] = []
    first: list[Any] = []
    errors: list[float] = []
    float64, why64 = False, ""
    float32_s = float64_s = 0.0
    where = job.device if (on_device := stays_on_device(job, fp)) else "cpu"
    for step in replay(module, job, True, on_device):
        t, outputs = step.trial, step.outputs
        channel.safe_point()  # (the trial's runs are done: its outputs are what it holds)
        if t == 0:  # trial 0 stays: the determinism and degeneracy checks
            first = outputs
            float64 = any(o.dtype == torch.float32 for o in outputs)
            errors = [0.0] * len(outputs)
        elif t == 1:
            warnings += degeneracy_warnings([first, outputs])
        float32_s, float64_s = float32_s + step.float32_s, float64_s + step.float64_s
        why64 = why64 or step.why64
        row: list[Any] | str = []
        if float64 and not why64 and not step.raised:
            row = float64_row(outputs, step.exact, where)
            why64 = row if isinstance(row, str) else ""
        budget = max(exact.FLOAT64_MIN_S, exact.FLOAT64_BUDGET * float32_s)
        if float64 and not why64 and float64_s > budget:
            why64 = f"numerics: no float64 reference: the float64 run took over {budget:.0f} s"
        note = f"the reference raised on it ({step.raised})" if step.raised else ""
        if t >= job.first_wide_trial and not note:
            what = exact._nonfinite(outputs, step.changed)
            note = f"the reference's {what} is not finite on it" if what else ""
        if note:
            kept.dropped.append(t)
            kept.notes.append(f"numerics: wide-range trial {t} dropped: {note}")
            continue
        kept.trial_ids.append(t)
        if t >= job.first_wide_trial:
            kept.wide.append(t)
        states.append(step.changed)
        magnitudes.append([magnitude(o) for o in outputs])
        if float64 and not why64 and t in kept.plain and isinstance(row, list):
            for i, x in enumerate(row):
                if x is not None:
                    errors[i] = max(errors[i], largest_difference(outputs[i], x))
        del outputs, row, step
    walk_s = time.perf_counter() - walk_started
    spent.extend([("float32 trials", float32_s), ("float64", float64_s),
                  ("reads of the trials", walk_s - float32_s - float64_s)])  # fmt: skip
    if first and (constant := degeneracy_warnings([first])) and not warnings:
        warnings += constant
    with spent.timed("determinism"):
        again = model_forward(build_model(module.Model, module, job), job.device)(
            job_inputs.make_inputs(module, job, 0)
        )
        check_deterministic(first, again)
    dtypes = [str(o.dtype).removeprefix("torch.") for o in first]
    sizes = [o.numel() * o.element_size() for o in first]
    del again, first
    gc.collect()
    with spent.timed("time per call"):
        forward = model_forward(build_model(module.Model, module, job), job.device)
        per_call_ms = measure_per_call(forward, module, job)
    with spent.timed("file"):
        tensorfile.write({"buffers": states}, Path(job.outputs_path))
    exact_ok = float64 and not why64
    warnings += [*kept.notes, *([why64] if float64 and why64 else [])]
    channel.send(
        "reference",
        warnings=warnings,
        per_call_ms=per_call_ms,
        trials=asdict(kept),
        streamed={
            "float64": exact_ok,
            "float32_error": errors if exact_ok else [0.0] * len(errors),
            "magnitudes": magnitudes,
            "dtypes": dtypes,
            "output_bytes": sum(sizes),
        },
        spent=spent.phases(),
    )
    serve_oracle(forward, module, job, channel)


def check_deterministic(first: list[Any], again: list[Any]) -> None:
    """Trial 0's outputs and those of a second run of it, from a model built again: the
    same (piece by piece), else the problem's error."""
    for a, b in zip(first, again, strict=False):
        if not all_close(a, b, rtol=1e-5, atol=1e-6):  # piece by piece
            raise CandidateFailure(
                "PROBLEM_ERROR",
                "the reference is nondeterministic under a fixed seed: two runs of trial 0 "
                "differ. Seed or remove the randomness in Model.forward (e.g. dropout), "
                "or use deterministic ops.",
            )


def serve_compared_trials(module: Any, job: Job, channel: Channel, spec: TrialSpec) -> None:
    """A candidate's verification trials against a streamed reference, compared here
    (oracle_compare.py): per compared trial, the parent says `trial PATH` (the candidate's
    file, moved into this child's folder) and only then is the reference's trial recomputed
    (replay: every trial in order, as the reference's child ran them), compared, and the
    verdict sent (`compared`); anything else ends the stream; then `trials-done`."""
    device = compare_device(job.device, spec.output_bytes)
    if device is None and job.device.startswith("cuda"):
        said_on_host(channel, "no room on the device for the trials")
    steps = replay(module, job, spec.float64, on_device=device is not None)
    for pos, wanted in enumerate(spec.ids):
        command = sys.stdin.readline().split()
        if command[:1] != ["trial"] or len(command) != 2:
            break
        step = next((s for s in steps if s.trial == wanted), None)
        if step is None:
            channel.send("compared", error=f"trial {wanted}: the reference has no such trial")
            break
        row: list[Any] | str | None = None
        where = device  # this trial's: the host where the device has no room for it now
        if spec.float64:
            row, where = step.why64 or None, device
            if not row:
                row, where = float64_row_where(step, device)
                if where is None and device is not None:
                    said_on_host(channel, "the float64 run ran out of device memory")
        if step.raised or isinstance(row, str):
            channel.send("compared", error=f"trial {wanted}: {step.raised or row}")
            break
        found = compare_trial(spec, pos, step.outputs, row, step.changed, Path(command[1]),
                              where)  # fmt: skip
        del row, step
        channel.send("compared", comparison=asdict(found))
    channel.send("trials-done")


def said_on_host(channel: Channel, why: str) -> None:
    """Tells the parent that this request's work goes to the host, and whether other
    processes hold the device (a bench's other jobs): if the request then outlives the
    oracle's time limit (H200, 39_L2Norm_ with 3 jobs a GPU: 8 GiB trials, killed after
    124 s), that is the device's state, no verdict on the candidate (oracle.Oracle)."""
    channel.send("on-host", why=why, crowded=crowded_device())


def float64_row_where(step: Replayed, device: str | None) -> tuple[list[Any] | str, str | None]:
    """A replayed trial's float64 row on `device` (None: the host), and where it is: on the
    host where the device runs out of memory for it (other processes hold it)."""
    import torch

    try:
        return float64_row(step.outputs, step.exact, device or "cpu"), device
    except Exception as exc:
        if not device_oom(exc):
            raise
        torch.cuda.empty_cache()
        return float64_row(step.outputs, step.exact, "cpu"), None


def serve_compared_runs(
    forward: Callable[[list[Any]], list[Any]],
    module: Any,
    job: Job,
    channel: Channel,
    spec: RunSpec,
) -> None:
    """A candidate's chosen timed runs and burst calls (their outputs in `spec.path`)
    against the reference's on the same inputs, recomputed one run at a time and compared
    here; `compared-runs` with the first difference ("" where none)."""
    saved = load(Path(spec.path))
    actual = [candidate_outputs(o, shared=True) for o in saved] if isinstance(saved, list) else []
    # The reference's outputs are made where it runs and compared there piece by piece: a
    # run brings no float64 copies, so the room compare_device asks for trials is not needed
    # (on a full device that rule sent 7 GiB outputs to the host: 121 s, past the limit)
    device = job.device if job.device.startswith("cuda") else None
    order = spec.inputs()
    difference = ""
    if len(actual) != len(order):
        difference = f"{len(actual)} timed runs' outputs came back for {len(order)} chosen"
    for draw, run in sorted(set(order)) if not difference else []:
        inputs = job_inputs.timing_inputs(module, job, run, draw)
        expected = [t.detach() for t in forward(inputs)]
        for i, label in enumerate(labels(spec.runs, spec.calls)):
            if order[i] == (draw, run) and not difference:
                difference = compare_run(spec, label, expected, actual[i], device)
        del expected, inputs
        if difference:
            break
    channel.send("compared-runs", difference=difference)


def degeneracy_warnings(trials: list[list[Any]]) -> list[str]:
    import torch

    if len(trials) > 1 and all(
        torch.equal(a, b) for a, b in zip(trials[0], trials[1], strict=True)
    ):
        return [
            "degenerate problem: the reference output does not depend on its inputs "
            "(two different input seeds gave identical outputs)"
        ]
    if any(t.numel() > 1 and bool((t == t.flatten()[0]).all()) for t in trials[0]):
        return ["degenerate problem: a reference output is constant"]
    return []
