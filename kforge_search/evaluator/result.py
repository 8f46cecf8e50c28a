"""The one typed outcome of an evaluation: a Status, artifacts, correctness and timing."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from kforge_search.evaluator.phases import Phases
from kforge_search.evaluator.profile import Profile


class Status(enum.StrEnum):
    OK = "OK"
    COMPILE_ERROR = "COMPILE_ERROR"
    INCORRECT = "INCORRECT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    REJECTED = "REJECTED"
    INFRA_ERROR = "INFRA_ERROR"  # the harness failed, not the candidate: worth retrying


@dataclass(frozen=True)
class Mismatch:
    """Where a candidate's output (or a buffer its forward updates) first disagrees with the
    reference."""

    trial: int
    output_index: int
    reason: str  # "shape", "dtype", "nonfinite", "values", "type", "count", "missing"
    expected: str  # shape/dtype text, or the values at `indices`
    actual: str
    indices: tuple[tuple[int, ...], ...] = ()
    n_mismatched: int = 0
    n_total: int = 0
    buffer: str = ""  # set when it is a buffer the forward changed, e.g. "bn.running_mean"


@dataclass(frozen=True)
class Correctness:
    trials_run: int = 0
    trials_passed: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    # elements outside tolerance of the float32 reference but accepted by the float64 rule
    # (as close to the float64 result as the reference, and within tolerance of it)
    by_float64: int = 0
    # the output dtype whose row of the policy's table atol and rtol are ("float16": its
    # own tolerances), of the last output compared
    dtype: str = ""


@dataclass(frozen=True)
class TimingStats:
    method: str  # "cuda_events" | "perf_counter"
    runs: int
    p20_ms: float
    p50_ms: float
    p80_ms: float
    host_p50_ms: float = 0.0  # CUDA: wall clock of a run incl. a device-wide synchronize
    meaningful: bool = True  # False for an interpreter (cpu-triton)
    # cores other processes kept busy while it was timed, on average (the parent's
    # measurement: host_load.py); at host_load.loaded's bound, not the machine's own figure
    host_others: float = 0.0


@dataclass(frozen=True)
class PeerCheck:
    """A baseline kind's outputs on the verification trials against the reference, under
    one policy (evaluator/peers.py), at the problem's sizes or (`unseen`) at its unseen
    sizes: it is admissible as a peer there only if it passed at both."""

    policy: str
    passed: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatch: str = ""  # where it first failed: "trial 7 output 0: values"
    unseen: bool = False  # at the problem's unseen sizes (a check cached before: False)


@dataclass(frozen=True)
class Baseline:
    """The reference timed the same way: `kind` is "eager" or "compile", or either at the
    platform's reduced precision ("eager-tf32", "compile-bf16": evaluator/peers.py)."""

    kind: str
    ok: bool
    timing: TimingStats | None = None
    error: str = ""
    cached: bool = False
    tries: int = 1  # timed this many times: a spread that showed interference was timed again
    noisy: bool = False  # every try's spread showed interference: used, never cached
    # per policy, at the problem's sizes then at its unseen sizes; none for fp32 eager
    checks: tuple[PeerCheck, ...] = ()
    note: str = ""  # why a kind is no peer at all (a reduced precision that changes nothing)
    # the problem's unseen sizes, where the evaluation has them: peers.CHECKED (`checks`
    # holds those there too), peers.STREAMED (their reference streams: not checked); ""
    # where it has none
    unseen: str = ""
    # it failed out of device memory that other processes held (out_of_memory.busy_reasons):
    # the device's moment, not the problem's; never cached, measured again
    busy: bool = False

    def check(self, policy: str, unseen: bool = False) -> PeerCheck | None:
        """The check under `policy` at the problem's sizes (`unseen`: at its unseen sizes)."""
        return next((c for c in self.checks if (c.policy, c.unseen) == (policy, unseen)), None)


@dataclass(frozen=True)
class Artifacts:
    compile_log: str = ""
    output_tail: str = ""  # what the candidate printed (head and tail kept)
    traceback: str = ""
    mismatch: Mismatch | None = None
    # named reasons for REJECTED (e.g. "static:no-triton-jit"), or for the static check's
    # COMPILE_ERROR ("static:undefined-name"), or a RUNTIME_ERROR's DEVICE_BUSY_REASON
    reasons: tuple[str, ...] = ()


# a RUNTIME_ERROR's reason: the candidate ran out of device memory while other processes held
# a quarter of it or more (a bench's other jobs): evaluated again alone, it may pass
DEVICE_BUSY_REASON = "device:busy"


@dataclass(frozen=True)
class LimitsUsed:
    """The time limits the candidate's child ran under (evaluator/limits.py)."""

    stages: tuple[tuple[str, float], ...] = ()  # seconds per stage: build, verify, time, ...
    reference_ms: float = 0.0  # the reference's time per call they were scaled from
    scaled: bool = False  # False: the configured limits, as they are


@dataclass(frozen=True)
class EvalResult:
    status: Status
    message: str  # what happened and what to do, for a person or an LLM
    stage: str  # the stage it ended in: static_check, build, verify, time, profile, done
    problem_id: str
    problem_name: str
    platform: str
    policy: str
    candidate_hash: str
    sizes: tuple[tuple[str, Any], ...] = ()
    device_name: str = ""
    torch_version: str = ""
    artifacts: Artifacts = field(default_factory=Artifacts)
    correctness: Correctness = field(default_factory=Correctness)
    timing: TimingStats | None = None
    baselines: tuple[Baseline, ...] = ()
    warnings: tuple[str, ...] = ()
    generalizes: str = "unchecked"  # "yes" / "no": verified at the problem's unseen sizes
    duration_s: float = 0.0
    profile: Profile | None = None  # the profile stage's, when the evaluator profiles
    phases: Phases = ()  # seconds per phase of duration_s (evaluator/phases.py)
    limits: LimitsUsed = field(default_factory=LimitsUsed)  # of the candidate's child

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def baseline(self, kind: str) -> Baseline | None:
        return next((b for b in self.baselines if b.kind == kind), None)

    def speedup(self, kind: str) -> float | None:
        """Baseline p50 over candidate p50, when both were measured meaningfully."""
        base = self.baseline(kind)
        if not (self.ok and self.timing and self.timing.meaningful and base and base.ok):
            return None
        if base.timing is None or not base.timing.meaningful or self.timing.p50_ms <= 0:
            return None
        return base.timing.p50_ms / self.timing.p50_ms

    def peer(self) -> Baseline | None:
        """The fastest PyTorch setting that passes this result's policy (peers.py)."""
        from kforge_search.evaluator.peers import peer_of_record

        return peer_of_record(self.baselines, self.policy)

    @property
    def speedup_of_record(self) -> float | None:
        """Over the peer of record: the fastest admissible eager / compile, fp32 or reduced."""
        peer = self.peer()
        return self.speedup(peer.kind) if peer else None

    @property
    def speedup_fp32(self) -> float | None:
        """Over the faster of fp32 eager and fp32 compile (the figure before peers)."""
        from kforge_search.evaluator.peers import fastest_fp32

        fastest = fastest_fp32(self.baselines)
        return self.speedup(fastest.kind) if fastest else None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        data["sizes"] = dict(self.sizes)
        data["limits"]["stages"] = dict(self.limits.stages)
        data["speedup_vs_eager"] = self.speedup("eager")
        data["speedup_vs_compile"] = self.speedup("compile")
        peer = self.peer()
        data["peer"] = peer.kind if peer else None
        data["speedup"] = self.speedup_of_record
        data["speedup_fp32"] = self.speedup_fp32
        return data
