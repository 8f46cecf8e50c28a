"""`kforge bench`: an agent plus a small search over its drafts, per problem of a suite.

For every problem the agent proposes a seed draft and then up to budget - 1 more (the
builtin agent mutates the fastest verified one); each is evaluated, and the fastest draft
that verified (and generalizes) is the problem's result. Rows report the eager and
torch.compile times, the best time, the speedup of record (over the fastest PyTorch setting
that passes the policy: eager or compile, fp32 or at reduced precision, named in `peer`;
evaluator/peers.py) with the fp32-only speedup (over the faster of fp32 eager and compile)
beside it, the GEMM precision and the fraction of the roofline reached (docs/synthesizer.md
defines it).

A problem that cannot be run gets a row too, with the reason in `message`, and the bench goes
on: REFERENCE_FAILED (its reference raised or exceeded a limit of the evaluator), AGENT_ERROR
(the agent raised; drafts evaluated before stand) and BENCH_ERROR (anything else raised).
"""

from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_search.agents.base import Agent, Context, Parent
from kforge_search.evaluator.host_load import bent
from kforge_search.evaluator.peers import fastest_fp32, peer_of_record
from kforge_search.evaluator.result import DEVICE_BUSY_REASON
from kforge_search.hardware import Peaks
from kforge_search.platforms import Platform
from kforge_search.problem import Problem

FIELDS = (
    "problem",
    "status",
    "eager_ms",
    "compile_ms",
    "best_ms",
    "speedup",
    "peer",
    "speedup_fp32",
    "precision",
    "roofline",
    "attempts",
    "verified",
    "generalizes",
    "genome",
    "seconds",
    "reference_s",
    "message",
    "host_others",
    "bent",
)


REFERENCE_FAILED = "REFERENCE_FAILED"
AGENT_ERROR = "AGENT_ERROR"
BENCH_ERROR = "BENCH_ERROR"
NOT_RUN = "NOT_RUN"  # a merged table's problem that no merged run has a row for
DEVICE_BUSY = "DEVICE_BUSY"  # its reference, or each draft, lacked device memory others held
UNRUNNABLE = (REFERENCE_FAILED, AGENT_ERROR, BENCH_ERROR, DEVICE_BUSY)
# not a verdict on the problem: --resume runs them again
RUN_AGAIN = (AGENT_ERROR, BENCH_ERROR, NOT_RUN, DEVICE_BUSY)


@dataclass(frozen=True)
class BenchRow:
    problem: str
    status: str  # the best draft's status, "unsupported: ...", the last failure's status, or
    # one of UNRUNNABLE (the reason in `message`)
    eager_ms: float | None = None
    compile_ms: float | None = None
    best_ms: float | None = None
    speedup: float | None = None  # of record: over `peer`, the fastest admissible setting
    precision: str = ""
    roofline: float | None = None  # fraction of the roofline at `precision`
    attempts: int = 0
    verified: bool = False
    generalizes: str = "unchecked"
    genome: str = ""
    seconds: float = 0.0  # wall clock of the problem's evaluations (baselines included)
    reference_s: float = 0.0  # of `seconds`: its reference, before the first draft
    message: str = ""
    peer: str = ""  # the baseline kind of record, e.g. "compile-tf32" (evaluator/peers.py)
    speedup_fp32: float | None = None  # over the faster of fp32 eager and fp32 compile
    # cores other processes kept busy while the best draft or its peer was timed (the more
    # of the two: evaluator/host_load.py); where that bent a timing (host_load.bent) the
    # speedup is not the machine's own
    host_others: float = 0.0
    bent: bool = False  # host_load.bent: of the best draft's timing or its peer's

    @property
    def loaded(self) -> bool:
        return self.verified and self.bent


@dataclass(frozen=True)
class BenchSummary:
    problems: int
    verified: int
    geomean_speedup: float | None  # of record, over the problems with a verified, timed kernel
    fast_0: float  # fraction of problems with a verified kernel
    fast_1: float  # ... and faster than the faster baseline
    fast_1_5: float  # ... and at least 1.5x faster
    median_roofline: float | None
    unrunnable: int = 0  # problems that could not be run (UNRUNNABLE rows)
    # over every problem, one without a verified, timed kernel counted as 1.0x (the user
    # keeps PyTorch's own there): the figure that unsupported problems cannot flatter
    geomean_all: float | None = None
    geomean_fp32: float | None = None  # as geomean_speedup, over fp32 eager / compile only
    geomean_all_fp32: float | None = None  # as geomean_all, over fp32 eager / compile only
    not_run: int = 0  # problems of the suite no run reached (NOT_RUN rows: bench --merge)
    loaded: int = 0  # verified rows timed on a loaded host (BenchRow.loaded)
    # of fast_1's rows, those faster by 1% or less (1.0x < speedup <= 1.01x): parity within
    # the timing's noise (H200, level 1: nine elementwise rows and losses at 1.000-1.01x,
    # where compile's kernels and ours run at the same 90% of bandwidth)
    fast_1_by_little: int = 0


class BenchError(Exception):
    """A bench cannot go on as asked (e.g. resuming from another policy's results)."""


class AgentError(Exception):
    """The agent raised while asked about a problem (`str`: the exception, one line)."""


@dataclass(frozen=True)
class Searched:
    """One problem's search: the drafts evaluated (in order), why the agent did not try
    ("unsupported: ..."), and the agent's error when it raised part way (the drafts
    evaluated before it stand)."""

    parents: list[Parent]
    unsupported: str = ""
    agent_error: str = ""
    reference_s: float = 0.0  # the wall clock of its reference before the first draft
    reference_parts: tuple[tuple[str, float], ...] = ()  # Reference.spent, where computed


def one_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: message`, on one line: what a row's message says of an exception."""
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}"[:limit]


def _ask(call: Callable[..., Any], *args: Any) -> Any:
    """An agent call; whatever it raises comes out as AgentError (the original chained)."""
    try:
        return call(*args)
    except Exception as exc:
        raise AgentError(one_line(exc)) from exc


def load_rows(path: Path, policy: str, platform: str) -> dict[str, BenchRow]:
    """The rows of an earlier run of the same policy and platform, by problem name; rows of
    problems stopped by an error of the agent or the bench (RUN_AGAIN) are left out, to be
    run again."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        meta = data["meta"]
        # a row from before peers: its speedup was over fp32 eager / compile, no peer named
        rows = [BenchRow(**{"speedup_fp32": row.get("speedup"), **row}) for row in data["rows"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} is not a bench.json this version can read: {exc}") from None
    if (meta.get("policy"), meta.get("platform")) != (policy, platform):
        raise BenchError(
            f"{path} holds a {meta.get('policy')} run on {meta.get('platform')}, "
            f"not {policy} on {platform}"
        )
    return {row.problem: row for row in rows if row.status not in RUN_AGAIN}


def roofline_fraction(
    flops: float, bytes_moved: float, ms: float, peaks: Peaks, precision: str
) -> float | None:
    """The roofline's time bound over the measured time: max(compute bound, memory bound)."""
    if ms <= 0 or flops <= 0:
        return None
    compute_s = flops / (peaks.tflops(precision or "ieee") * 1e12)
    memory_s = bytes_moved / (peaks.mem_gbs * 1e9)
    return max(compute_s, memory_s) / (ms * 1e-3)


def _baseline_ms(baselines: tuple[Any, ...], kind: str) -> float | None:
    base = next((b for b in baselines if b.kind == kind), None)
    if base is None or not base.ok or base.timing is None or not base.timing.meaningful:
        return None
    return base.timing.p50_ms


def search_problem(
    problem: Problem,
    platform: Platform,
    policy: str,
    budget: int,
    evaluator: Any,
    agent: Agent,
    seed: int = 0,
    on_result: Callable[[Parent], None] | None = None,
    screen: int = 0,
    on_screen: Callable[[list[Any]], None] | None = None,
    lent: Any = None,
    on_reference: Callable[[Searched], None] | None = None,
) -> Searched:
    """Evaluate up to `budget` drafts.

    The reference runs first, in the evaluator's child: one that fails or exceeds a limit
    raises ProblemError before any draft is made. With `screen` > 0 (the builtin agent on a
    timed platform), that many genomes are first timed in this process (agents/screen.py)
    and the fastest `budget` go to the evaluator; what budget is left goes to the agent's
    own proposals. `on_reference` is given the reference's time (a Searched without drafts)
    before the first draft. The agent raising before any draft is evaluated raises
    AgentError; later, the search stops there and `Searched.agent_error` says why. `lent`
    (cli/bench_jobs.Lent):
    after the first draft, evaluators idle elsewhere are borrowed, and the agent is asked for
    as many drafts more, evaluated side by side."""
    support = _ask(agent.supports, problem, platform)
    if not support.ok:
        return Searched([], unsupported=support.reason)
    started = time.monotonic()
    ref = evaluator.reference(problem, platform)  # cached: the first evaluation reuses it
    ahead = {"reference_s": round(time.monotonic() - started, 1),
             "reference_parts": tuple(getattr(ref, "spent", ()))}  # fmt: skip
    if on_reference is not None:  # before any draft: e.g. the bench's line on its time
        on_reference(Searched([], **ahead))
    parents: list[Parent] = []

    def evaluated(draft: Any, on: Any, kept: Parent | None) -> Parent:
        # a draft no faster than the best kept one cannot be kept: its unseen sizes' check
        # is spared (candidate_drive.CandidateDrive), as the most of a larger budget's
        below = kept.p50_ms if kept is not None else None
        result = on.evaluate_source(draft.source, problem, platform, unseen_below_ms=below)
        if DEVICE_BUSY_REASON in result.artifacts.reasons:
            # others held the device (its reference or it ran out of memory beside a bench's
            # other jobs): no verdict on the draft, so it is evaluated once more before it
            # counts (H200x2, level 1 at published sizes, 3 jobs a GPU: 38_L1Norm_'s and
            # 39_L2Norm_'s seeds were INFRA_ERROR so, and only their mutants were timed)
            result = on.evaluate_source(draft.source, problem, platform, unseen_below_ms=below)
        return Parent(draft, result)

    def evaluate(drafts: list[Any], on: list[Any]) -> None:
        kept = best_parent(parents)
        if len(drafts) == 1:
            done = [evaluated(drafts[0], on[0], kept)]
        else:  # side by side, each on its own evaluator; kept in the drafts' order
            with concurrent.futures.ThreadPoolExecutor(len(drafts)) as pool:
                done = list(pool.map(evaluated, drafts, on, [kept] * len(drafts)))
        for parent in done:
            parents.append(parent)
            if on_result is not None:
                on_result(parent)

    try:
        if screen > 0 and platform.timing_meaningful:
            from kforge_search.agents.builtin.agent import BuiltinAgent
            from kforge_search.agents.builtin.screen import screened_drafts

            if not isinstance(agent, BuiltinAgent):
                raise ValueError("screening runs drafts in this process: builtin agent only")
            drafts, ranked = _ask(
                screened_drafts, agent, problem, platform, policy, screen, budget, seed
            )
            if on_screen is not None:
                on_screen(ranked)
            for draft in drafts:
                evaluate([draft], [evaluator])
        while len(parents) < budget:
            left = budget - len(parents)
            extra = lent.borrow(left - 1) if lent is not None and parents else []
            try:
                context = Context(problem, platform, policy, tuple(parents),
                                  budget=1 + len(extra), seed=seed, remaining=left)  # fmt: skip
                drafts = _ask(agent.propose, context)[: 1 + len(extra)]
                if not drafts:
                    break
                evaluate(drafts, [evaluator, *extra])
            finally:
                if extra:
                    lent.give_back(extra)
    except AgentError as exc:
        if not parents:
            raise
        return Searched(parents, agent_error=str(exc), **ahead)
    return Searched(parents, **ahead)


def best_parent(parents: list[Parent]) -> Parent | None:
    good = [p for p in parents if p.result.ok and p.result.generalizes != "no"]
    timed = [p for p in good if p.p50_ms is not None]
    if timed:
        return min(timed, key=lambda p: p.p50_ms or 0.0)
    return good[0] if good else None


def bench_row(
    problem: Problem,
    parents: list[Parent],
    stop: str,
    work: Any,
    peaks: Peaks | None,
    baselines: tuple[Any, ...] = (),
    agent_error: str = "",
) -> BenchRow:
    """The problem's row: the best verified draft against its baselines (eager, compile), or
    against `baselines` when no draft verified; `agent_error` (the agent raised after these
    drafts) leads the message."""
    best = best_parent(parents)
    if best is not None and best.result.baselines:
        baselines = best.result.baselines
    eager, compiled = _baseline_ms(baselines, "eager"), _baseline_ms(baselines, "compile")
    if stop:
        return BenchRow(problem.name, stop, eager, compiled, message=stop)
    error = f"agent error after {len(parents)} drafts: {agent_error}; " if agent_error else ""
    if best is None:
        last = parents[-1].result if parents else None
        status = last.status.value if last else "no draft"
        if any(DEVICE_BUSY_REASON in p.result.artifacts.reasons for p in parents):
            status = DEVICE_BUSY  # others held the device: evaluated again alone (bench_jobs)
        message = last.message.splitlines()[0][:200] if last and last.message else ""
        return BenchRow(
            problem.name, status, eager, compiled, attempts=len(parents), message=error + message
        )
    timing = best.result.timing
    ms = timing.p50_ms if timing and timing.meaningful else None
    peer = peer_of_record(baselines, best.result.policy)
    fp32 = fastest_fp32(baselines)
    speedup = peer.timing.p50_ms / ms if peer and peer.timing and ms else None
    speedup_fp32 = fp32.timing.p50_ms / ms if fp32 and fp32.timing and ms else None
    roof = None
    if ms and peaks is not None and work is not None:
        roof = roofline_fraction(work.flops, work.min_bytes, ms, peaks, best.draft.precision)
    genome = best.draft.genome
    timings = (timing, peer.timing if peer else None)
    others = max((t.host_others for t in timings if t is not None), default=0.0)
    is_bent = any(bent(t) for t in timings if t is not None)
    note = best.draft.note[:200]
    if is_bent:
        note = f"timed on a loaded host ({others:.1f} cores busy elsewhere); {note}"
    return BenchRow(
        problem=problem.name,
        status=best.result.status.value,
        eager_ms=eager,
        compile_ms=compiled,
        best_ms=ms,
        speedup=speedup,
        peer=peer.kind if peer and speedup else "",
        speedup_fp32=speedup_fp32,
        precision=best.draft.precision,
        roofline=roof,
        attempts=len(parents),
        verified=True,
        generalizes=best.result.generalizes,
        genome=_genome_text(genome),
        message=error + note,
        host_others=others,
        bent=is_bent,
    )


def unrunnable_row(problem: Problem, status: str, reason: str, seconds: float = 0.0) -> BenchRow:
    """The row of a problem that could not be run: `status` one of UNRUNNABLE, `reason` as
    the evaluator or the exception gave it (shortened: `short_reason`)."""
    if status not in UNRUNNABLE:
        raise ValueError(f"status {status!r}: use one of {UNRUNNABLE}")
    return BenchRow(problem.name, status, seconds=seconds, message=short_reason(reason))


def not_run_row(problem: Problem) -> BenchRow:
    """A merged table's row for a problem that none of the merged runs reached."""
    return BenchRow(problem.name, NOT_RUN, message="not run: no merged run has a row for it")


def short_reason(reason: str, limit: int = 500) -> str:
    """A failure's text on one line: its first line and, of a longer one (a traceback), its
    last (the exception)."""
    lines = [" ".join(line.split()) for line in reason.splitlines() if line.strip()]
    if len(lines) > 3:
        lines = [lines[0], "...", lines[-1]]
    return " | ".join(lines)[:limit]


def _genome_text(genome: Any) -> str:
    if genome is None:
        return ""
    return " ".join(f"{k}={v}" for k, v in dataclasses.asdict(genome).items())


PARITY = 0.01  # a speedup within this of 1.0x is parity, whichever side (timing noise)


def summarize(rows: list[BenchRow]) -> BenchSummary:
    n = len(rows)
    verified = [r for r in rows if r.verified]
    speedups = [r.speedup for r in verified if r.speedup]
    fp32 = [r.speedup_fp32 for r in verified if r.speedup_fp32]
    roofs = [r.roofline for r in verified if r.roofline is not None]
    geomean = _geomean(speedups)

    def frac(p: float) -> float:
        return sum(1 for s in speedups if s > p) / n if n else 0.0

    return BenchSummary(
        problems=n,
        verified=len(verified),
        geomean_speedup=geomean,
        fast_0=len(verified) / n if n else 0.0,
        fast_1=frac(1.0),
        fast_1_5=frac(1.5),
        median_roofline=statistics.median(roofs) if roofs else None,
        unrunnable=sum(1 for r in rows if r.status in UNRUNNABLE),
        geomean_all=_geomean(speedups + [1.0] * (n - len(speedups))),
        geomean_fp32=_geomean(fp32),
        geomean_all_fp32=_geomean(fp32 + [1.0] * (n - len(fp32))),
        not_run=sum(1 for r in rows if r.status == NOT_RUN),
        loaded=sum(1 for r in rows if r.loaded),
        fast_1_by_little=sum(1 for s in speedups if 1.0 < s <= 1.0 + PARITY),
    )


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def write_outputs(
    rows: list[BenchRow], summary: BenchSummary, out: Path, meta: dict[str, Any]
) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out / "bench.json", out / "bench.csv"
    data = {
        "meta": meta,
        "summary": dataclasses.asdict(summary),
        "rows": [dataclasses.asdict(r) for r in rows],
    }
    json_path.write_text(json.dumps(data, indent=2))
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow(dataclasses.asdict(row))
    return json_path, csv_path
