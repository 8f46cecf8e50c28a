"""Rows from an EvalResult: what `kforge eval --db` and a search store after an evaluation."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import kforge_search
from kforge_search.evaluator.result import Artifacts, EvalResult, Status
from kforge_search.hardware import Peaks, datasheet_peaks
from kforge_search.problem import Problem

from .ids import candidate_id, content_id, utcnow
from .records import (
    BaselineRecord,
    CandidateRecord,
    EvaluationRecord,
    HardwareRecord,
    ProblemRecord,
    ProfileRecord,
    Record,
    RunRecord,
)
from .signature import op_signature
from .writer import Writer, WriteReport

ARTIFACT_CHARS = 64 * 1024  # per text artifact: the head quarter and the tail kept


@dataclass(frozen=True)
class Work:
    """FLOPs and bytes moved by the problem at the evaluated sizes (for the roofline)."""

    flops: float
    bytes_moved: float

    def __post_init__(self) -> None:
        if self.flops < 0 or self.bytes_moved <= 0:
            raise ValueError(f"{self}: flops must be >= 0 and bytes_moved > 0")


@dataclass(frozen=True)
class Origin:
    """Where a candidate came from; the default is a hand-written root candidate."""

    parent_ids: tuple[str, ...] = ()
    lineage_id: str = ""
    generation: int = 0
    pass_kind: str = "optimization"
    agent: str = ""
    model: str = ""
    prompt_hash: str = ""


HAND_WRITTEN = Origin(agent="human")


@dataclass(frozen=True)
class Recorded:
    candidate_id: str
    evaluation_id: str
    report: WriteReport


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _clip(text: str, chars: int = ARTIFACT_CHARS) -> str:
    if len(text) <= chars:
        return text
    head = chars // 4
    return f"{text[:head]}\n[... {len(text) - chars} chars cut ...]\n{text[-(chars - head) :]}"


def artifacts_json(artifacts: Artifacts) -> str:
    data = dataclasses.asdict(artifacts)
    for name in ("compile_log", "output_tail", "traceback"):
        data[name] = _clip(data[name])
    return _json(data)


def error_kind(result: EvalResult) -> str:
    """A short class of failure to group by: "static:no-triton-jit", "timeout:build", ..."""
    if result.status is Status.OK:
        return ""
    named = result.status in (Status.REJECTED, Status.COMPILE_ERROR)  # static:undefined-name
    if named and result.artifacts.reasons:
        return result.artifacts.reasons[0]
    if result.status is Status.INCORRECT and result.artifacts.mismatch:
        return f"mismatch:{result.artifacts.mismatch.reason}"
    return f"{result.status.value.lower()}:{result.stage}"


def roofline_fraction(
    work: Work, p50_ms: float, peaks: Peaks, precision: str = "fp32"
) -> float | None:
    """Roofline time (compute- or memory-bound) over the measured time; None if unknown."""
    try:
        flops_per_s = peaks.tflops(precision) * 1e12
    except KeyError:
        return None
    if p50_ms <= 0 or flops_per_s <= 0 or peaks.mem_gbs <= 0:
        return None
    ideal_s = max(work.flops / flops_per_s, work.bytes_moved / (peaks.mem_gbs * 1e9))
    return ideal_s / (p50_ms / 1e3)


def problem_record(problem: Problem, work: Work | None = None) -> ProblemRecord:
    signature = op_signature(problem.source)
    return ProblemRecord(
        id=problem.id,
        name=problem.name,
        path=problem.path,
        source=problem.source,
        op_signature=signature.text,
        op_vector=signature.vector(),
        flops=work.flops if work else None,
        bytes_moved=work.bytes_moved if work else None,
        work_sizes=_json(problem.sizes) if work else "{}",
    )


def hardware_record(result: EvalResult, peaks: Peaks | None = None, **kw: str) -> HardwareRecord:
    """The machine of a result; peaks default to the datasheet's for the device name."""
    found = peaks or datasheet_peaks(result.device_name)
    return HardwareRecord.create(
        result.device_name or "unknown",
        result.platform,
        torch_version=result.torch_version,
        peaks=found,
        **kw,
    )


def _peaks(hw: HardwareRecord) -> Peaks | None:
    values = (hw.fp32_tflops, hw.tf32_tflops, hw.bf16_tflops, hw.mem_gbs)
    if any(v is None for v in values):
        return None
    return Peaks(hw.device_name, *values, hw.peaks_source)


def eval_records(
    result: EvalResult,
    candidate_source: str,
    problem: Problem,
    *,
    origin: Origin = HAND_WRITTEN,
    run_id: str = "",
    hardware: HardwareRecord | None = None,
    precision: str = "fp32",
    generalizes: bool | None = None,
    work: Work | None = None,
) -> tuple[Record, ...]:
    """The problem, hardware, candidate, evaluation and baseline rows of one result."""
    cid = candidate_id(candidate_source, result.platform)
    if cid != result.candidate_hash:
        raise ValueError(
            f"the source given hashes to {cid}, but the result is of candidate "
            f"{result.candidate_hash}: pass the source that was evaluated"
        )
    hw = hardware or hardware_record(result)
    if generalizes is None:  # the evaluator's own unseen-size check, where it ran
        generalizes = {"yes": True, "no": False}.get(result.generalizes)
    sizes = _json(dict(result.sizes))
    timing = result.timing
    peaks = _peaks(hw)
    roofline = None
    if work and peaks and timing and timing.meaningful and result.ok:
        roofline = roofline_fraction(work, timing.p50_ms, peaks, precision)
    c = result.correctness
    evaluation = EvaluationRecord(
        id=content_id(cid, hw.id, sizes, result.policy, precision, run_id),
        candidate_id=cid,
        problem_id=result.problem_id,
        platform=result.platform,
        hardware_id=hw.id,
        status=result.status.value,
        stage=result.stage,
        policy=result.policy,
        precision=precision,
        run_id=run_id,
        error_kind=error_kind(result),
        message=_clip(result.message),
        artifacts=artifacts_json(result.artifacts),
        size_set=problem.size_set,
        sizes=sizes,
        trials_run=c.trials_run,
        trials_passed=c.trials_passed,
        max_abs_err=c.max_abs_err,
        max_rel_err=c.max_rel_err,
        atol=c.atol,
        rtol=c.rtol,
        timing_method=timing.method if timing else "",
        runs=timing.runs if timing else 0,
        p20_ms=timing.p20_ms if timing else None,
        p50_ms=timing.p50_ms if timing else None,
        p80_ms=timing.p80_ms if timing else None,
        timing_meaningful=bool(timing and timing.meaningful),
        speedup_eager=result.speedup("eager"),
        speedup_compile=result.speedup("compile"),
        roofline_fraction=roofline,
        generalizes=generalizes,
        warnings=result.warnings,
        duration_s=result.duration_s,
        phases=json.dumps(dict(result.phases)),
        peer=peer.kind if (peer := result.peer()) else None,
        speedup=result.speedup_of_record,
        speedup_fp32=result.speedup_fp32,
    )
    candidate = CandidateRecord(
        cid,
        result.problem_id,
        result.platform,
        candidate_source,
        run_id=run_id,
        **dataclasses.asdict(origin),
    )
    baselines = [
        BaselineRecord(
            id=content_id(result.problem_id, hw.id, sizes, b.kind),
            problem_id=result.problem_id,
            hardware_id=hw.id,
            platform=result.platform,
            kind=b.kind,
            ok=b.ok,
            sizes=sizes,
            timing_method=b.timing.method if b.timing else "",
            runs=b.timing.runs if b.timing else 0,
            p20_ms=b.timing.p20_ms if b.timing else None,
            p50_ms=b.timing.p50_ms if b.timing else None,
            p80_ms=b.timing.p80_ms if b.timing else None,
            error=b.error,
            checks=_json([dataclasses.asdict(c) for c in b.checks]),
            note=b.note,
        )
        for b in result.baselines
    ]
    profiles = profile_records(result, cid, evaluation.id, hw.id)
    return (problem_record(problem, work), hw, candidate, evaluation, *baselines, *profiles)


def profile_records(
    result: EvalResult, cid: str, evaluation_id: str, hardware_id: str
) -> tuple[ProfileRecord, ...]:
    """The profile stage's rows: the profile (torch.profiler or the launch timer) and, where
    ncu ran, its metrics per kernel. Ids follow the evaluation, so a retry writes the same."""
    profile = result.profile
    if profile is None:
        return ()
    rows = [
        ProfileRecord(
            id=content_id(evaluation_id, profile.tool),
            candidate_id=cid,
            tool=profile.tool,
            metrics=profile.to_json(),
            evaluation_id=evaluation_id,
            hardware_id=hardware_id,
        )
    ]
    if profile.ncu:
        ncu = [{"name": k.name, "metrics": dict(k.metrics)} for k in profile.ncu]
        rows.append(
            ProfileRecord(
                id=content_id(evaluation_id, "ncu"),
                candidate_id=cid,
                tool="ncu",
                metrics=_json(ncu),
                evaluation_id=evaluation_id,
                hardware_id=hardware_id,
            )
        )
    return tuple(rows)


def eval_run(config: Any, result: EvalResult, **extra: str) -> RunRecord:
    """A finished run of kind "eval": the evaluator's config (a dataclass) plus `extra`."""
    settings = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    ended = utcnow()
    return RunRecord(
        "eval",
        _json({**settings, **extra, "sizes": dict(result.sizes)}),
        kforge_search.__version__,
        status="finished",
        started_at=ended - timedelta(seconds=result.duration_s),
        ended_at=ended,
    )


def record_eval_result(
    writer: Writer,
    result: EvalResult,
    candidate_source: str,
    problem: Problem,
    *,
    run: RunRecord | None = None,
    **kw: Any,
) -> Recorded:
    """Store one result (and its run, if given) in one batch; see `eval_records` for kw."""
    run_id = run.id if run else kw.pop("run_id", "")
    records = eval_records(result, candidate_source, problem, run_id=run_id, **kw)
    report = writer.write([*([run] if run else []), *records])
    return Recorded(records[2].id, records[3].id, report)
