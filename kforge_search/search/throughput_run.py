"""A throughput measurement: one `kforge search` (builtin agent) in a child process, watched
from outside for a fixed wall clock, then read back (`kforge bench --throughput`,
scripts/search_throughput.py).

While the search runs, a sampler reads the host's CPU time (/proc/stat) and, where
nvidia-smi exists, each GPU's utilization twice a second; every device lock hold of the
search's evaluators goes to a journal ($KFORGE_LOCK_JOURNAL, evaluator/devicelock.py). At
the duration the search is stopped as Ctrl-C stops it (what it evaluated is stored), and
its database, the journal and the ticks give the figures (search/throughput.py).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kforge_search.procs.cpu_parts import Parts
from kforge_search.search.throughput import (
    Best,
    Evaluation,
    Throughput,
    Tick,
    parse_journal,
    steady_window,
    window,
)

# 8 bundled level-2 problems: GEMMs with elementwise, reduction and normalization tails
DEFAULT_PROBLEMS = tuple(
    f"level2/{name}"
    for name in (
        "01_gemm_bias_relu",
        "02_gemm_gelu_scale",
        "03_gemm_swish_bias",
        "05_gemm_scale_clamp_min",
        "09_gemm_sum",
        "13_gemm_softmax",
        "16_gemm_layernorm_relu",
        "21_mlp_two_gemm_relu",
    )
)
STOP_WAIT_S = 120.0  # for a stopped search to store what it has and let its cluster go
TICK_S = 0.5


@dataclass(frozen=True)
class ThroughputConfig:
    """One measurement. `duration_s` None: until the search ends by itself (its
    `generations` spent); else it is stopped then, if still running."""

    out: Path
    problems: tuple[str, ...] = DEFAULT_PROBLEMS  # names or files, as `kforge search` takes
    platform: str = "cuda-triton"
    policy: str = "loose"
    lineages: int = 2
    generations: int = 1000  # steps per lineage at most: the duration ends the search first
    sizes: str | None = None
    seed: int = 0
    duration_s: float | None = 600.0
    workers: int | None = None  # evaluator actors (None: the search's default)
    per_gpu: int | None = None  # actors sharing a GPU (None: the search's default)
    max_minutes: float | None = None  # the search's own time box (checked before each step)
    fresh_cache: bool = False  # a new cache folder: every build and baseline done again
    tag: str = ""  # file names: search-TAG.duckdb, search-TAG.log, locks-TAG.txt
    journal: Path | None = None  # the lock journal (None: OUT/locks[-TAG].txt, new)

    def __post_init__(self) -> None:
        from kforge_search.evaluator.policy import get_policy
        from kforge_search.platforms import get_platform

        get_platform(self.platform)  # ValueError: unknown, with the names to use
        get_policy(self.policy)
        if not self.problems:
            raise ValueError("no problems: give at least one problem to search")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"duration {self.duration_s:g} s: needs more than 0 (e.g. 600)")
        for name in ("lineages", "generations", "workers", "per_gpu"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} {value}: needs at least 1")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes {self.max_minutes:g}: needs more than 0")

    def path(self, stem: str, suffix: str) -> Path:
        return self.out / (f"{stem}-{self.tag}{suffix}" if self.tag else f"{stem}{suffix}")

    @property
    def db(self) -> Path:
        return self.path("search", ".duckdb")

    @property
    def log(self) -> Path:
        return self.path("search", ".log")

    @property
    def lock_journal(self) -> Path:
        return self.journal or self.path("locks", ".txt")

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kforge_search", "search", *self.problems]
        cmd += ["--platform", self.platform, "--db", str(self.db), "--policy", self.policy]
        cmd += ["--lineages", str(self.lineages), "--generations", str(self.generations)]
        cmd += ["--seed", str(self.seed), "--no-profile", "--format", "table"]
        optional = {"--workers": self.workers, "--per-gpu": self.per_gpu,
                    "--sizes": self.sizes, "--max-minutes": self.max_minutes}  # fmt: skip
        for flag, value in optional.items():
            if value is not None:
                cmd += [flag, str(value)]
        return cmd


def level2_problems(prefixes: list[str]) -> tuple[str, ...]:
    """Bundled level-2 problems by their number ("01" -> "level2/01_gemm_bias_relu")."""
    from kforge_search.problem import bundled_problems_dir

    names = sorted(p.stem for p in (bundled_problems_dir() / "level2").glob("*.py"))
    found = []
    for prefix in prefixes:
        match = [n for n in names if n.startswith(f"{prefix}_")]
        if not match:
            raise ValueError(f"no bundled level2 problem numbered {prefix!r}: e.g. 01, 13, 21")
        found.append(f"level2/{match[0]}")
    return tuple(found)


@dataclass
class _Sampler:
    """Ticks of the machine every TICK_S seconds, in a thread, until `stop()`."""

    gpus: bool
    ticks: list[Tick] = field(default_factory=list)
    parts: Parts = field(default_factory=Parts)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="throughput-ticks")
        self._thread.start()

    def stop(self) -> list[Tick]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.ticks.append(self._tick())
        return self.ticks

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ticks.append(self._tick())
            self._stop.wait(TICK_S)

    def _tick(self) -> Tick:
        busy, total = _cpu_jiffies()
        parts = tuple(self.parts.sample().items())
        gpus = _gpu_utilization() if self.gpus else ()
        return Tick(time.time(), busy, total, gpus, parts, os.sysconf("SC_CLK_TCK"))


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine since boot; (0, 0) without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _gpu_utilization() -> tuple[float, ...]:
    """Each GPU's utilization now (percent, by index), from nvidia-smi; () if it fails."""
    query = ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
        rows = sorted((int(i), float(u)) for i, u in (line.split(",") for line in out.splitlines()))
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return ()
    return tuple(u for _, u in rows)


def _stop_signal() -> signal.Signals:
    """SIGINT stops a search as Ctrl-C does; where this process ignores it (started in the
    background of a non-interactive shell) its child does too, and SIGTERM does the same."""
    return signal.SIGTERM if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else signal.SIGINT


def _copy_lines(stream: TextIO, log: TextIO, on_line: Callable[[str], None] | None) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        if on_line is not None:
            on_line(line.rstrip("\n"))


@dataclass
class StepCount:
    """The search's lineage steps as its output lines say them (`gen G LINEAGE (kind):
    STATUS[ (known)], ...`: cli/live.py), and those whose every draft's result was another
    lineage's (free: engine.Search.spent)."""

    steps: int = 0
    reused: int = 0

    def line(self, text: str) -> None:
        if not text.startswith("gen ") or "): " not in text:
            return
        self.steps += 1
        verdicts = text.split("): ", 1)[1].split(";", 1)[0].split("  (", 1)[0].split(", ")
        if verdicts and all(v.strip().endswith("(known)") for v in verdicts):
            self.reused += 1


def measure(config: ThroughputConfig, on_line: Callable[[str], None] | None = None) -> Throughput:
    """Run the search (its output to config.log, each line to `on_line`), stop it at the
    duration, and read its figures. Ctrl-C here stops the search the same way."""
    from kforge_search.platforms import get_platform

    config.out.mkdir(parents=True, exist_ok=True)
    stale = [config.db, Path(f"{config.db}.wal")]
    stale += [] if config.journal else [config.lock_journal]  # a given journal: appended to
    for path in stale:
        path.unlink(missing_ok=True)
    gpu = get_platform(config.platform).device_kind == "cuda"
    cache = tempfile.mkdtemp(prefix="kforge-cache-") if config.fresh_cache else None
    env = {**os.environ, "KFORGE_LOCK_JOURNAL": str(config.lock_journal), "PYTHONUNBUFFERED": "1"}
    if cache:
        env["KFORGE_CACHE_DIR"] = cache
    cmd = config.command()
    sampler = _Sampler(gpus=shutil.which("nvidia-smi") is not None)
    stopped = False
    try:
        with open(config.log, "w") as log:
            sampler.start()
            started = time.time()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env=env, process_group=0)  # fmt: skip
            assert proc.stdout is not None
            counted = StepCount()

            def each(line: str) -> None:
                counted.line(line)
                if on_line is not None:
                    on_line(line)

            copier = threading.Thread(target=_copy_lines, args=(proc.stdout, log, each))
            copier.start()
            try:
                stopped, ended = _wait(proc, config.duration_s)
            finally:
                if proc.poll() is None:  # an error here: the search does not outlive it
                    proc.kill()
                    proc.wait()
                copier.join()
    finally:
        ticks = sampler.stop()
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    stored = _read_store(config.db)
    journal = config.lock_journal
    holds = parse_journal(journal.read_text()) if journal.exists() else ()
    actors = stored.actors or config.workers or 1  # the pool as the search's run recorded it
    per_gpu = stored.per_gpu or config.per_gpu or 1
    lanes = 1
    if gpu:  # one lane per GPU the actors were given, of those the sampler saw
        seen = max((len(t.gpus) for t in ticks), default=0)
        lanes = max(1, min(math.ceil(actors / per_gpu), seen or actors))
    evals = stored.evaluations
    end = max([ended, *(e.ended for e in evals)])
    return Throughput(
        platform=config.platform,
        gpu=gpu,
        problems=config.problems,
        actors=actors,
        per_gpu=per_gpu,
        cpus=os.cpu_count() or 1,
        command=" ".join(cmd[1:]),
        exit_code=proc.returncode,
        stopped=stopped,
        evaluations=len(evals),
        verified=stored.verified,
        busy_s=sum(e.duration_s for e in evals),
        whole=window(evals, holds, ticks, started, end, lanes),
        steady=steady_window(evals, holds, ticks, lanes),
        best=stored.best,
        runs=stored.runs,
        steps=counted.steps,
        reused_steps=counted.reused,
    )


def _wait(proc: subprocess.Popen[str], duration_s: float | None) -> tuple[bool, float]:
    """Wait for the search until the duration, then stop it; (stopped, when it ended or was
    stopped). Ctrl-C here stops it too, and the figures are still read."""
    try:
        proc.wait(timeout=duration_s)
        return False, time.time()
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt:
        pass
    ended = time.time()
    proc.send_signal(_stop_signal())
    try:
        proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:  # the search's watcher ends what it started
        proc.kill()
        proc.wait()
    return True, ended


@dataclass(frozen=True)
class _Stored:
    evaluations: tuple[Evaluation, ...] = ()
    verified: int = 0
    best: tuple[Best, ...] = ()
    runs: tuple[tuple[str, float | None], ...] = ()
    actors: int | None = None  # None: not recorded (the search failed before its run began)
    per_gpu: int | None = None


def _read_store(db: Path) -> _Stored:
    """What the search stored: its evaluations (search and winners' runs), the best per
    problem, and the evaluator pool's size as its run recorded it. Nothing if it stored
    nothing (it failed before it opened the file)."""
    from kforge_search.store.reader import Reader

    if not db.exists():
        return _Stored()
    with Reader.open(db) as reader:
        runs = reader.query(
            "SELECT kind, epoch(ended_at) - epoch(started_at), config FROM runs ORDER BY started_at"
        ).rows
        rows = reader.query(
            "SELECT coalesce(p.name, e.problem_id), epoch(e.created_at), e.duration_s, "
            "e.phases, e.status FROM evaluations e LEFT JOIN problems p ON p.id = e.problem_id "
            "ORDER BY e.created_at"
        ).rows
        best = reader.query(
            "SELECT coalesce(p.name, e.problem_id), max(e.speedup) FILTER (e.status = 'OK'), "
            "arg_max(e.peer, e.speedup) FILTER (e.status = 'OK' AND e.speedup IS NOT NULL), "
            "max(e.speedup_fp32) FILTER (e.status = 'OK') FROM evaluations e "
            "LEFT JOIN problems p ON p.id = e.problem_id GROUP BY 1 ORDER BY 1"
        ).rows
    pool: dict[str, Any] = {}
    for kind, _, text in runs:
        if kind == "search":
            pool = next(iter(json.loads(text or "{}").get("evaluators", {}).values()), {})
            break
    evaluations = tuple(
        Evaluation(name, float(ended), float(seconds or 0.0),
                   tuple(json.loads(phases or "{}").items()), status or "")
        for name, ended, seconds, phases, status in rows
    )  # fmt: skip
    return _Stored(
        evaluations=evaluations,
        verified=sum(1 for *_, status in rows if status == "OK"),
        best=tuple(Best(*row) for row in best),
        runs=tuple((kind, None if s is None else round(float(s), 1)) for kind, s, _ in runs),
        actors=int(pool["actors"]) if "actors" in pool else None,
        per_gpu=int(pool["per_gpu"]) if "per_gpu" in pool else None,
    )
