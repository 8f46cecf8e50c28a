"""A synthetic load: insert throughput of batched writes and latency of every retrieval query.

`kforge db bench` fills a fresh file with problems, lineages of candidates (about 1.5 KB of
source each) and evaluations (60 % OK, with timings and speedups), in batches, and then
times each query a few times against random problems.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .ids import content_id
from .reader import Reader
from .records import CandidateRecord, EvaluationRecord, HardwareRecord, ProblemRecord, Record
from .signature import OpSignature
from .writer import Writer

PLATFORMS = ("cuda-triton", "cuda-cpp", "cpu-cpp", "cpu-triton")
_OPS = (
    *("linear", "matmul", "bmm", "relu", "gelu", "sigmoid", "tanh", "mul", "add", "sub"),
    *("div", "softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "sum"),
    *("mean", "max", "logsumexp", "transpose", "view", "conv1d", "cumsum", "clamp"),
)
_FAILURES = (
    ("COMPILE_ERROR", "build"),
    ("INCORRECT", "verify"),
    ("RUNTIME_ERROR", "verify"),
    ("TIMEOUT", "time"),
    ("REJECTED", "static_check"),
)


@dataclass(frozen=True)
class BenchConfig:
    candidates: int = 100_000
    evaluations: int = 300_000
    problems: int = 200
    batch_rows: int = 4_000  # rows per transaction (candidates and evaluations together)
    repeats: int = 20  # timed runs per query
    seed: int = 0

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.problems < 1 or self.evaluations < self.candidates:
            raise ValueError(
                f"{self}: need candidates >= 1, problems >= 1 and evaluations >= candidates "
                "(every candidate is evaluated at least once)"
            )
        if self.batch_rows < 2 or self.repeats < 1:
            raise ValueError(f"batch_rows={self.batch_rows}, repeats={self.repeats}: >= 2, >= 1")


@dataclass(frozen=True)
class QueryTiming:
    name: str
    p50_ms: float
    max_ms: float
    rows: int  # rows returned by the last run


@dataclass(frozen=True)
class BenchReport:
    rows: int
    batches: int
    write_s: float  # inside Writer.write (redaction, Arrow, insert, commit)
    generate_s: float  # building the records (not the store's work)
    queries: tuple[QueryTiming, ...]
    file_bytes: int

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.write_s if self.write_s else 0.0


def _source(rng: random.Random, cid: int) -> str:
    block = rng.choice((16, 32, 64, 128))
    body = "\n".join(
        f"    acc{i} = tl.load(ptr + offs * {rng.randint(1, 9)} + {i}, mask=mask, other=0.0)"
        for i in range(24)
    )
    head = f"# candidate {cid}\n@triton.jit\ndef kernel(ptr, n, BLOCK: tl.constexpr = {block}):"
    return f"{head}\n{body}\n"


def _problems(cfg: BenchConfig, rng: random.Random) -> list[ProblemRecord]:
    out = []
    for i in range(cfg.problems):
        sig = OpSignature(tuple(rng.choice(_OPS) for _ in range(rng.randint(1, 6))))
        out.append(
            ProblemRecord(
                content_id("bench-problem", i),
                f"bench/{i:04d}_{sig.ops[0]}",
                "",
                f"# problem {i}: {sig.text}\n",
                sig.text,
                sig.vector(),
            )
        )
    return out


def _evaluation(rng: random.Random, cand: CandidateRecord, hw: HardwareRecord, k: int) -> Record:
    ok = rng.random() < 0.6
    status, stage = ("OK", "done") if ok else rng.choice(_FAILURES)
    p50 = rng.lognormvariate(0, 1) if ok else None
    speedup = rng.lognormvariate(0, 0.5) if ok and hw.platform != "cpu-triton" else None
    return EvaluationRecord(
        content_id(cand.id, hw.id, k),
        cand.id,
        cand.problem_id,
        cand.platform,
        hw.id,
        status,
        stage,
        "strict",
        size_set=("ci", "default", "unseen")[k % 3],
        error_kind="" if ok else f"{status.lower()}:{stage}",
        message="ok" if ok else f"{status} in {stage}: see the log",
        p20_ms=p50 and p50 * 0.95,
        p50_ms=p50,
        p80_ms=p50 and p50 * 1.05,
        runs=50 if ok else 0,
        timing_meaningful=speedup is not None,
        speedup_eager=speedup,
        speedup_compile=speedup and speedup * rng.uniform(0.5, 1.0),
        generalizes=(rng.random() < 0.9) if ok else None,
    )


def _batches(
    cfg: BenchConfig, problems: list[ProblemRecord], hardware: dict[str, HardwareRecord]
) -> Iterator[list[Record]]:
    rng = random.Random(cfg.seed)
    groups: dict[tuple[str, str], list[CandidateRecord]] = {}
    per_candidate = cfg.evaluations / cfg.candidates
    batch: list[Record] = []
    evaluations = 0
    for i in range(cfg.candidates):
        key = (rng.choice(problems).id, rng.choice(PLATFORMS))
        family = groups.setdefault(key, [])
        parent = rng.choice(family[-20:]) if family and rng.random() < 0.8 else None
        source = _source(rng, i)
        cand = CandidateRecord(  # a raw-text id: parsing 100k sources would dominate the run
            content_id(source, key[1]),
            key[0],
            key[1],
            source,
            parent_ids=(parent.id,) if parent else (),
            lineage_id=parent.lineage_id if parent else "",
            generation=parent.generation + 1 if parent else 0,
            agent="bench",
            model="synthetic",
        )
        family.append(cand)
        batch.append(cand)
        due = round((i + 1) * per_candidate) - evaluations
        for k in range(due):
            batch.append(_evaluation(rng, cand, hardware[key[1]], k))
        evaluations += due
        if len(batch) >= cfg.batch_rows:
            yield batch
            batch = []
    if batch:
        yield batch


def _time(fn: Callable[[], list], repeats: int) -> tuple[float, float, int]:
    fn()  # warm-up
    times, rows = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        rows = len(fn())
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), max(times), rows


def time_queries(reader: Reader, problem_ids: list[str], repeats: int) -> tuple[QueryTiming, ...]:
    from . import queries, retrieval

    rng = random.Random(1)
    pick = lambda: rng.choice(problem_ids)  # noqa: E731
    deep = reader.query("SELECT id FROM candidates ORDER BY generation DESC LIMIT 1").rows[0][0]
    cases: dict[str, Callable[[], list]] = {
        "cross_platform": lambda: retrieval.cross_platform(reader, pick(), "cuda-triton"),
        "similar_problems": lambda: retrieval.similar_problems(reader, pick(), "cuda-triton"),
        "diverse_top_k": lambda: retrieval.diverse_top_k(reader, pick(), "cuda-triton"),
        "one_shot_examples": lambda: retrieval.one_shot_examples(reader),
        "best (problem, platform)": lambda: queries.best_kernels(reader, pick(), "cpu-cpp"),
        "best (all)": lambda: queries.best_kernels(reader),
        "lineage (deepest)": lambda: queries.lineage(reader, deep),
        "show candidate": lambda: queries.candidate_detail(reader, deep).evaluations.rows,
    }
    return tuple(QueryTiming(name, *_time(fn, repeats)) for name, fn in cases.items())


def run_bench(
    path: str | Path, cfg: BenchConfig, progress: Callable[[int], None] | None = None
) -> BenchReport:
    """Fill `path` (a new file) with cfg's load and time the queries."""
    file = Path(path)
    if file.exists():
        raise FileExistsError(f"{file} exists: the benchmark fills a new file; pass another --db")
    rng = random.Random(cfg.seed)
    problems = _problems(cfg, rng)
    hardware = {
        p: HardwareRecord.create("NVIDIA H100 80GB HBM3" if p.startswith("cuda") else "cpu", p)
        for p in PLATFORMS
    }
    rows = batches = 0
    write_s = generate_s = 0.0
    with Writer(file) as writer:
        writer.write([*problems, *hardware.values()])
        start = time.perf_counter()
        for batch in _batches(cfg, problems, hardware):
            generate_s += time.perf_counter() - start
            report = writer.write(batch)
            write_s += report.seconds
            rows += report.rows
            batches += 1
            if progress:
                progress(report.rows)
            start = time.perf_counter()
        writer.checkpoint()
    with Reader.open(file) as reader:
        timings = time_queries(reader, [p.id for p in problems], cfg.repeats)
    return BenchReport(rows, batches, write_s, generate_s, timings, file.stat().st_size)
