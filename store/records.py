"""Rows of the store as frozen dataclasses: one class per table, fields named as columns.

Fields typed `str` whose names end in a JSON role (config, sizes, artifacts, metrics,
suggestions, work_sizes) hold JSON text. Timestamps are naive UTC. A record checks itself
in `__post_init__`; the writer redacts secrets and turns records into Arrow tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from kforge_search.evaluator.result import Status
from kforge_search.hardware import Peaks

from .ids import candidate_id, content_id, new_id, utcnow
from .signature import VECTOR_DIM

PASS_KINDS = ("functional", "optimization")
PRECISIONS = ("fp32", "ieee", "tf32", "tf32rn", "tf32x3", "bf16x3", "bf16", "fp16")
RUN_STATUSES = ("running", "finished", "failed", "interrupted")
LLM_STATUSES = ("ok", "http_error", "timeout", "refused", "truncated", "unparsable", "no_key")
STATUSES = tuple(s.value for s in Status)


class Record:
    """Base of all rows: `TABLE` names the table, `id` is the primary key."""

    TABLE: ClassVar[str]
    id: str


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_id(record: Record) -> None:
    _need(bool(record.id), f"{type(record).__name__} needs a non-empty id")


@dataclass(frozen=True)
class ProblemRecord(Record):
    TABLE: ClassVar[str] = "problems"
    id: str  # kforge_search.problem.source_hash of the source
    name: str
    path: str
    source: str
    op_signature: str  # e.g. "linear,relu" (store.signature)
    op_vector: tuple[float, ...]
    flops: float | None = None  # at `work_sizes`, for the roofline
    bytes_moved: float | None = None
    work_sizes: str = "{}"
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        _check_id(self)
        _need(
            len(self.op_vector) == VECTOR_DIM,
            f"op_vector has {len(self.op_vector)} values, needs {VECTOR_DIM}: "
            "build it with store.signature.op_signature(source).vector()",
        )


@dataclass(frozen=True)
class HardwareRecord(Record):
    TABLE: ClassVar[str] = "hardware"
    id: str  # content_id of the fields below (see `HardwareRecord.create`)
    device_name: str
    platform: str
    driver: str = ""
    torch_version: str = ""
    triton_version: str = ""
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    mem_gbs: float | None = None
    peaks_source: str = ""  # "datasheet", "measured" or "" (unknown)
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        _check_id(self)

    @classmethod
    def create(
        cls,
        device_name: str,
        platform: str,
        *,
        driver: str = "",
        torch_version: str = "",
        triton_version: str = "",
        peaks: Peaks | None = None,
    ) -> HardwareRecord:
        """A machine's row; its id is a hash of everything but the peaks."""
        hid = content_id(device_name, platform, driver, torch_version, triton_version)
        return cls(
            hid,
            device_name,
            platform,
            driver,
            torch_version,
            triton_version,
            peaks.fp32_tflops if peaks else None,
            peaks.tf32_tflops if peaks else None,
            peaks.bf16_tflops if peaks else None,
            peaks.mem_gbs if peaks else None,
            peaks.source if peaks else "",
        )


@dataclass(frozen=True)
class RunRecord(Record):
    TABLE: ClassVar[str] = "runs"
    kind: str  # "search", "eval", "bench"
    config: str  # JSON
    tool_version: str
    status: str = "running"  # a running run whose driver died reads as interrupted (runs.py)
    started_at: datetime = field(default_factory=utcnow)
    ended_at: datetime | None = None
    id: str = field(default_factory=new_id)
    host: str = ""  # where its driver runs, and the driver's process id (0: not known)
    pid: int = 0
    heartbeat_at: datetime | None = None  # the driver's last sign of life (runs.HEARTBEAT_S)

    def __post_init__(self) -> None:
        _check_id(self)
        _need(self.status in RUN_STATUSES, f"run status {self.status!r}: use {RUN_STATUSES}")


@dataclass(frozen=True)
class CandidateRecord(Record):
    TABLE: ClassVar[str] = "candidates"
    id: str  # source_hash(source, platform), as EvalResult.candidate_hash
    problem_id: str
    platform: str
    source: str
    lineage_id: str = ""  # the root of its lineage; its own id when empty
    parent_ids: tuple[str, ...] = ()
    generation: int = 0
    pass_kind: str = "optimization"
    agent: str = ""
    model: str = ""
    prompt_hash: str = ""
    run_id: str = ""
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        _check_id(self)
        _need(self.pass_kind in PASS_KINDS, f"pass_kind {self.pass_kind!r}: use {PASS_KINDS}")
        _need(self.generation >= 0, f"generation {self.generation}: must be >= 0")
        _need(self.id not in self.parent_ids, f"candidate {self.id} lists itself as a parent")
        if not self.lineage_id:
            object.__setattr__(self, "lineage_id", self.id)

    @classmethod
    def create(cls, source: str, problem_id: str, platform: str, **kw: Any) -> CandidateRecord:
        """A candidate whose id is the hash of its normalized source and platform."""
        return cls(candidate_id(source, platform), problem_id, platform, source, **kw)


@dataclass(frozen=True)
class EvaluationRecord(Record):
    TABLE: ClassVar[str] = "evaluations"
    id: str
    candidate_id: str
    problem_id: str
    platform: str
    hardware_id: str
    status: str
    stage: str
    policy: str
    precision: str = "fp32"
    run_id: str = ""
    error_kind: str = ""  # e.g. "timeout:build", "mismatch:values", "static:no-triton-jit"
    message: str = ""
    artifacts: str = "{}"  # JSON: compile_log, traceback, output_tail, mismatch, reasons
    size_set: str = "default"
    sizes: str = "{}"  # JSON
    trials_run: int = 0
    trials_passed: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    timing_method: str = ""
    runs: int = 0
    p20_ms: float | None = None
    p50_ms: float | None = None
    p80_ms: float | None = None
    timing_meaningful: bool = False
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    roofline_fraction: float | None = None
    generalizes: bool | None = None  # verified at unseen sizes; None: not checked
    warnings: tuple[str, ...] = ()
    duration_s: float = 0.0
    created_at: datetime = field(default_factory=utcnow)
    phases: str = "{}"  # JSON: seconds per phase of duration_s, e.g. {"build": 2.1, ...}
    # the speedup of record: over the fastest PyTorch setting that passes the policy (its
    # baseline kind in `peer`, e.g. "compile-tf32"); speedup_fp32: over the faster of fp32
    # eager and fp32 compile (evaluator/peers.py)
    peer: str | None = None
    speedup: float | None = None
    speedup_fp32: float | None = None

    def __post_init__(self) -> None:
        _check_id(self)
        _need(self.status in STATUSES, f"status {self.status!r}: use one of {STATUSES}")
        _need(self.precision in PRECISIONS, f"precision {self.precision!r}: use {PRECISIONS}")
        _need(
            self.status == Status.OK.value or (self.speedup_eager is None and self.speedup is None),
            f"evaluation {self.id} has status {self.status} but a speedup: only OK is timed",
        )


@dataclass(frozen=True)
class BaselineRecord(Record):
    TABLE: ClassVar[str] = "baselines"
    id: str  # content_id(problem_id, hardware_id, sizes, kind)
    problem_id: str
    hardware_id: str
    platform: str
    kind: str  # "eager", "compile", or either at reduced precision: "compile-tf32", ...
    ok: bool
    sizes: str = "{}"
    timing_method: str = ""
    runs: int = 0
    p20_ms: float | None = None
    p50_ms: float | None = None
    p80_ms: float | None = None
    error: str = ""
    created_at: datetime = field(default_factory=utcnow)
    checks: str = "[]"  # JSON: per policy, passed and the errors against the reference
    note: str = ""  # why the kind is no peer at all

    def __post_init__(self) -> None:
        from kforge_search.evaluator.peers import split_kind

        _check_id(self)
        split_kind(self.kind)  # ValueError naming the kinds there are


@dataclass(frozen=True)
class ProfileRecord(Record):
    TABLE: ClassVar[str] = "profiles"
    candidate_id: str
    tool: str  # "ncu", "nsys", "torch.profiler", "perf"
    metrics: str = "{}"  # JSON
    raw: bytes = b""  # the tool's own report
    evaluation_id: str = ""
    hardware_id: str = ""
    created_at: datetime = field(default_factory=utcnow)
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        _check_id(self)


@dataclass(frozen=True)
class RecommendationRecord(Record):
    TABLE: ClassVar[str] = "recommendations"
    candidate_id: str
    analysis: str
    suggestions: str = "[]"  # JSON list of {"title", "detail", ...}
    evaluation_id: str = ""
    profile_id: str = ""
    agent: str = ""
    model: str = ""
    created_at: datetime = field(default_factory=utcnow)
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        _check_id(self)


@dataclass(frozen=True)
class LlmCallRecord(Record):
    TABLE: ClassVar[str] = "llm_calls"
    role: str  # "writer", "analyst", ...
    model: str
    status: str  # one of LLM_STATUSES (kforge_search.llm.calls says what each means)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0  # all its attempts
    cached: bool = False
    run_id: str = ""
    candidate_id: str = ""  # what it wrote (writer) or analyzed (analyst); "" for none
    created_at: datetime = field(default_factory=utcnow)
    id: str = field(default_factory=new_id)
    lineage_id: str = ""
    attempts: int = 1  # requests sent, the SDK's retries included
    http_status: int = 0  # the last HTTP error status (0: none)
    error: str = ""  # why it failed

    def __post_init__(self) -> None:
        _check_id(self)
        _need(self.status in LLM_STATUSES, f"llm call status {self.status!r}: use {LLM_STATUSES}")
        _need(
            self.tokens_in >= 0 and self.tokens_out >= 0,
            f"tokens {self.tokens_in}/{self.tokens_out}: must be >= 0",
        )


RECORD_TYPES: tuple[type[Record], ...] = (
    ProblemRecord,
    HardwareRecord,
    RunRecord,
    CandidateRecord,
    EvaluationRecord,
    BaselineRecord,
    ProfileRecord,
    RecommendationRecord,
    LlmCallRecord,
)
BY_TABLE: dict[str, type[Record]] = {cls.TABLE: cls for cls in RECORD_TYPES}
