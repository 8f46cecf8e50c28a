"""`kforge bench [SUITE] --platform P --throughput`: a search of a fixed wall clock
(search/throughput_run.py), then its throughput: evaluations per GPU-minute (per minute on a
CPU platform) in steady state, the timing lane's busy fraction, GPU and CPU utilization,
seconds per evaluation by phase, and the best speedup per problem. Called by cli/bench.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from kforge_search.cli.output import Column, emit, note

console = Console()
err = Console(stderr=True)


def run_throughput(
    suite: str | None,
    match: str | None,
    platform: str,
    policy: str,
    lineages: int,
    generations: int | None,
    sizes: str | None,
    seed: int,
    minutes: float,
    out: str,
    fmt: str,
    per_gpu: int | None = None,
) -> None:
    """Measure, print the figures (`fmt`: table or json) and write OUT/throughput.json."""
    from kforge_search.cli.common import fail
    from kforge_search.search.throughput_run import ThroughputConfig, measure

    if fmt == "csv":
        fail("--throughput prints a table or json", "use --format table or --format json")
    if not minutes > 0:
        fail(f"--duration {minutes:g}: needs more than 0 minutes", "e.g. --duration 10")
    _platform(platform)
    names = _problems(suite, sizes, match)
    try:
        config = ThroughputConfig(
            out=Path(out), problems=tuple(names), platform=platform, policy=policy,
            lineages=lineages, sizes=sizes, seed=seed, duration_s=minutes * 60, per_gpu=per_gpu,
            **({"generations": generations} if generations else {}),
        )  # fmt: skip
    except ValueError as exc:
        fail(str(exc))
    log = console if fmt == "table" else err
    log.print(
        f"searching {len(names)} problem(s) on {platform} for {minutes:g} min "
        f"({lineages} lineage(s) each, policy {policy}); its output: {config.log}",
        highlight=False,
        soft_wrap=True,
    )
    with log.status("starting the search ...", spinner="dots") as status:

        def progress(line: str) -> None:
            if line.startswith("gen "):
                status.update(line[:120], spinner="dots")

        result = measure(config, on_line=progress)
    report = result.as_dict()
    path = Path(out) / "throughput.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    if result.evaluations == 0:
        fail(
            f"the search evaluated nothing (exit code {result.exit_code})",
            f"read its output in {config.log}; a longer --duration gives it time to start",
            code=1,
        )
    if fmt == "json":
        print(json.dumps(report, indent=1))
    else:
        _print(result)
    how = "stopped at the duration" if result.stopped else "the search ended by itself"
    note(
        f"{result.evaluations} evaluations ({result.verified} verified) in "
        f"{result.wall_s:.0f} s, {how}; {result.steps} lineage steps, {result.reused_steps} "
        "of them another lineage's results only (free); "
        f"{result.actors} evaluator actor(s), "
        f"{result.whole.lanes} timing lane(s), {result.cpus} CPUs\n{path}\n{config.log}",
        fmt,
    )


def _platform(name: str) -> None:
    """The platform exists and runs here, else an error that says what to do."""
    from kforge_search.cli.common import fail
    from kforge_search.platforms import availability, get_platform

    try:
        plat = get_platform(name)
    except ValueError as exc:
        fail(str(exc))
    state = availability(plat)
    if not state.ok:
        hint = "see `kforge platforms`"
        if plat.device_kind == "cuda":
            hint = "run it on a machine with an NVIDIA GPU, or measure a CPU platform here: "
            hint += "--platform cpu-cpp"
        fail(f"platform {name} cannot run on this machine: {state.reason}", hint)


def _problems(suite: str | None, sizes: str | None, match: str | None) -> list[str]:
    """The problems as `kforge search` takes them: SUITE's (bundled ones by name, others by
    path), or the 8 bundled level-2 problems of the throughput target; checked here."""
    from kforge_search.cli.common import fail, load, suite_problems
    from kforge_search.problem import bundled_problems_dir
    from kforge_search.search.throughput_run import DEFAULT_PROBLEMS

    if suite is None:
        chosen = [load(name, sizes, None) for name in DEFAULT_PROBLEMS]
        chosen = [p for p in chosen if not match or match in p.name]
    else:
        chosen, skipped = suite_problems(suite, sizes, {}, match)
        for line in skipped:
            err.print(f"[yellow]skipped[/] {line}", highlight=False, soft_wrap=True)
    if not chosen:
        fail("no problems to search", "leave out --match, or give a SUITE with problems")
    bundled = bundled_problems_dir().resolve()
    names = []
    for p in chosen:
        path = Path(p.path).resolve()
        inside = path.is_relative_to(bundled)
        names.append(path.relative_to(bundled).with_suffix("").as_posix() if inside else str(path))
    return names


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _waits(w: Any) -> str:
    return "-" if not w.lane_waits else f"{_num(w.lane_wait(0.5))} / {_num(w.lane_wait(0.9))}"


def _behind(w: Any) -> str:
    """The timings' waits by what they waited for last, the three largest (of 0.05 s or
    more: one evaluator on a CPU host waits next to nothing)."""
    return ", ".join(f"{k} {v:.1f}" for k, v in w.lane_waited_for[:3] if v >= 0.05) or "-"


def _print(result: Any) -> None:
    """The figures, whole run beside steady state; then the best speedup per problem."""
    whole, steady = result.whole, result.steady
    per = "evaluations / GPU-minute" if result.gpu else "evaluations / minute"

    def both(figure: str, get: Any) -> tuple[str, str, str]:
        return figure, get(whole), get(steady) if steady else "-"

    def gpus(w: Any) -> str:
        return ", ".join(f"{i}: {u:.1f}%" for i, u in enumerate(w.gpu_utilization)) or "-"

    rows = [
        both("seconds", lambda w: f"{w.seconds:.1f}"),
        both("evaluations", lambda w: str(w.evaluations)),
        both("  infra errors (not counted)", lambda w: str(w.infra_errors)),
        both(per, lambda w: _num(w.per_lane_minute)),
        both("timing lane busy (lock journal)", lambda w: _pct(w.lane_busy)),
        both("  idle while a timing waited", lambda w: _pct(w.lane_blocked)),
        both("  timing's wait for the lane p50 / p90 (s)", _waits),
        both("  behind (s, the hold released last)", _behind),
        both("GPU utilization (nvidia-smi)", gpus),
        both("CPU utilization", lambda w: _pct(w.cpu_utilization)),
        both("s / evaluation", lambda w: _num(w.mean_duration_s)),
    ]
    for name, seconds in (steady or whole).phases:  # largest first; none under 5 ms
        if seconds >= 0.005:
            rows.append(both(f"  {name}", lambda w, n=name: _num(dict(w.phases).get(n))))
    rows.append(both("CPU-s / evaluation", lambda w: _num(sum(v for _, v in w.cpu_parts) or None)))
    for name, seconds in (steady or whole).cpu_parts[:12]:  # by process (procs/cpu_parts.py)
        if seconds >= 0.005:
            rows.append(both(f"  {name}", lambda w, n=name: _num(dict(w.cpu_parts).get(n))))
    emit(("figure", Column("whole", "whole run"), Column("steady", "steady state")), rows)
    best = [(b.problem, b.speedup, b.peer, b.speedup_fp32) for b in result.best]
    speed = Column("speedup", show=lambda v: "-" if v is None else f"{v:.2f}x")
    fp32 = Column("speedup_fp32", "x fp32", show=lambda v: "-" if v is None else f"{v:.2f}x")
    emit(("problem", speed, Column("peer", show=lambda v: v or "-"), fp32), best,
         title="best verified kernel per problem")  # fmt: skip
