"""`kforge bench SUITE --platform P`: the builtin agent and a small genome search per problem,
against eager and torch.compile, each in fp32 and at the platform's reduced precision where
the policy admits it (the speedup of record names its peer; the fp32-only speedup stands
beside it). Registered in cli/app.py as `app.command("bench")(bench_cmd)`. With
`--search-efficiency`: cli/efficiency.py; with `--throughput`: cli/throughput.py; with
`--jobs N`: cli/bench_jobs.py; with `--gpus N`: cli/bench_gpus.py; one problem's run:
cli/bench_problem.py.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from kforge_search.cli.bench_jobs import SIDE_BY_SIDE, OneAtATime, device_shares, in_parallel
from kforge_search.cli.bench_problem import bench_problem
from kforge_search.cli.output import CELL_CHARS, Column, FormatOpt, check_format, emit, note

console = Console()
err = Console(stderr=True)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _status(row: Any) -> Text:
    return Text("OK", "green") if row.verified else Text(row.status, "red")


def _columns() -> tuple[Column, ...]:
    """The bench table's columns (as a person reads it); json and csv give every field."""
    ms = functools.partial(Column, show=lambda v: _fmt(v, ".4f"))
    return (
        Column("problem"),
        ms("eager_ms", "eager ms"),
        ms("compile_ms", "compile ms"),
        ms("best_ms", "best ms"),
        Column("speedup", show=lambda v: _fmt(v, ".2f") + ("x" if v else "")),
        Column("peer", show=lambda v: v or "-"),
        Column("speedup_fp32", "x fp32", show=lambda v: _fmt(v, ".2f") + ("x" if v else "")),
        Column("precision", show=lambda v: v or "-"),
        Column("roofline", show=lambda v: _fmt(v, ".0%")),
        Column("status", show=_status),
        Column("why", show=lambda v: v),
    )


def _cells(row: Any) -> tuple[Any, ...]:
    why = "" if row.verified else row.message
    return (row.problem, row.eager_ms, row.compile_ms, row.best_ms, row.speedup, row.peer,
            row.speedup_fp32, row.precision, row.roofline, row, why)  # fmt: skip


def _emit(rows: list[Any], fmt: str) -> None:
    from kforge_search.search.suite_bench import FIELDS

    if fmt == "table":
        emit(_columns(), [_cells(r) for r in rows], fmt)
    else:
        emit(FIELDS, [[getattr(r, name) for name in FIELDS] for r in rows], fmt)


def _one_row(row: Any, log: Console) -> None:
    """A finished problem, as it finishes: a one-row table on a terminal, else a line."""
    if log.is_terminal:
        emit(_columns(), [_cells(row)], "table", file=log.file)
        if not row.verified and len(row.message) > CELL_CHARS:  # cut in the table
            log.print(f"  {row.problem}: {row.message}", highlight=False, markup=False)
        return
    best = f" {row.best_ms:.4f} ms" if row.best_ms is not None else ""
    speedup = f" {row.speedup:.2f}x over {row.peer or '?'}" if row.speedup else ""
    if row.speedup_fp32:
        speedup += f" ({row.speedup_fp32:.2f}x over fp32)"
    why = f": {row.message}" if not row.verified and row.message else ""
    log.print(f"{row.problem}: {row.status}{best}{speedup}{why}", highlight=False, soft_wrap=True)


def compile_threads(jobs: int, shards: int) -> int:
    """torch.compile's compile workers per baseline child: the host's cores shared by the
    jobs of every shard (shards run side by side on one node: --gpus); 0
    (torch's default, a worker per core) for one job alone. Each child starts its workers,
    each importing torch: 12 jobs of 3 shards on a 64-core H200 host would start 768, and
    their baselines stages took 137-273 s (not measured apart from that)."""
    sharing = jobs * shards
    return 0 if sharing <= 1 else max(1, (os.cpu_count() or 1) // sharing)


def _shard(text: str) -> tuple[int, int]:
    """--shard I/N as (I, N), else a clear error."""
    from kforge_search.cli.common import fail

    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not int(index) < int(count):
        fail(f"--shard {text}: give I/N with 0 <= I < N", "e.g. --shard 0/4 ... --shard 3/4")
    return int(index), int(count)


def _rows_of(folder: str, flag: str, policy: str, platform: str) -> dict[str, Any]:
    """The kept rows of another run's OUT folder (given with `flag`), else a clear error."""
    from kforge_search.cli.common import fail
    from kforge_search.search.suite_bench import load_rows

    path = Path(folder) / "bench.json"
    if not path.exists():
        fail(f"{flag} {folder}: no {path}")
    return load_rows(path, policy, platform)


def _copy_best(folder: Path, out: Path, rows: dict[str, Any]) -> None:
    """A merged run's best kernels (folder/best/) beside this run's."""
    for name, row in rows.items():
        source = folder / "best" / f"{name.replace('/', '__')}.py"
        if row.verified and source.exists() and folder.resolve() != out.resolve():
            (out / "best").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out / "best" / source.name)


def _refuse(mode: str, **used: bool) -> None:
    """The options of a bench that `mode` (--throughput, --gpus) does not take: an error
    where one is given."""
    from kforge_search.cli.common import fail

    for name, given in used.items():
        if given:
            flag = "--" + name.replace("_", "-")
            fail(f"{flag} is not an option of {mode}", f"leave out {flag}")


def bench_cmd(
    platform: Annotated[str, typer.Option("--platform", help="see `kforge platforms`")],
    suite: Annotated[
        str | None,
        typer.Argument(
            help="a problem file or directory, or a bundled suite (--throughput: default, 8 "
            "bundled level2 problems)"
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(help="numeric policy: strict or loose (default strict; --throughput: loose)"),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            help="evaluations per problem: the seed and up to budget-1 mutants (default 4; "
            "--throughput: steps per lineage at most, default as many as --duration allows)"
        ),
    ] = None,
    out: Annotated[str, typer.Option(help="folder for bench.json, bench.csv, best/")] = "out/bench",
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="a named size set of the problems (e.g. ci)")
    ] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="override a constant, e.g. batch_size=8")
    ] = None,
    match: Annotated[
        str | None, typer.Option(help="only problems whose name contains this")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the genome search")] = 0,
    screen: Annotated[
        int,
        typer.Option(
            help="genomes timed in-process first; the fastest --budget go to the evaluator "
            "(0: off; timed platforms only)"
        ),
    ] = 0,
    resume: Annotated[
        bool, typer.Option(help="keep the rows already in OUT/bench.json; run the others")
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            help="I/N: only the suite's problems at positions I, I+N, I+2N, ... (0-based), "
            "e.g. one shard per GPU (CUDA_VISIBLE_DEVICES) with its own --out; --merge joins them"
        ),
    ] = None,
    merge: Annotated[
        list[str] | None,
        typer.Option(
            help="another run's OUT folder (repeatable; same policy and platform), e.g. each "
            "shard's: one table and summary of their rows in OUT; nothing runs, a problem of "
            "the suite none of them has is NOT_RUN (counted 1.0x over all)"
        ),
    ] = None,
    rest_of: Annotated[
        str | None,
        typer.Option(
            help="an earlier run's OUT folder: run only the problems it has no row for (or one "
            "to run again), before --shard splits them, so shards resuming a cut-short run "
            "share what is left evenly; with --merge its rows join the table"
        ),
    ] = None,
    search_efficiency: Annotated[
        bool,
        typer.Option(
            "--search-efficiency",
            help="compare evolutionary selection with random genome sampling at --budget "
            "evaluations (genomes timed in-process); writes OUT/efficiency.json",
        ),
    ] = False,
    trials: Annotated[int, typer.Option(help="--search-efficiency: trials per strategy")] = 3,
    jobs: Annotated[
        int,
        typer.Option(
            help="problems benched at once, each with its own evaluator: builds, verification "
            "and torch.compile go side by side, timed runs still hold the device alone; once "
            "every problem has started, idle evaluators take a problem's drafts side by side"
        ),
    ] = 1,
    throughput: Annotated[
        bool,
        typer.Option(
            "--throughput",
            help="a search of --duration minutes instead (builtin agent, its evaluator actors): "
            "evaluations per GPU-minute in steady state, the timing lane's busy fraction, GPU "
            "and CPU utilization, seconds by phase, best speedups; writes OUT/throughput.json",
        ),
    ] = False,
    duration: Annotated[
        float | None, typer.Option(help="--throughput: minutes of search (default 10)")
    ] = None,
    lineages: Annotated[
        int | None, typer.Option(help="--throughput: lineages per problem (default 2)")
    ] = None,
    per_gpu: Annotated[
        int | None,
        typer.Option(
            "--per-gpu",
            help="--throughput: evaluator actors sharing each GPU (default: as many as the "
            "node's cores keep busy, 2 each, at most 8)",
        ),
    ] = None,
    gpus: Annotated[
        int,
        typer.Option(
            help="one bench per GPU of this node (each with --jobs), each on its shard of the "
            "suite, then one table of their rows in OUT (0: one bench on one GPU)"
        ),
    ] = 0,
    fmt: FormatOpt = "table",
) -> None:
    """Synthesize, verify and time kernels for a suite; table, geomean and fast_p
    (--throughput: the search's throughput instead; --gpus: cli/bench_gpus.py)."""
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.cli.common import (
        fail,
        parse_overrides,
        platform_or_fail,
        suite_problems,
    )
    from kforge_search.evaluator import EvalConfig, Evaluator
    from kforge_search.evaluator.candidate_drive import UNSEEN_SKIPPED
    from kforge_search.search.device_room import free_share
    from kforge_search.search.suite_bench import (
        BenchError,
        best_parent,
        load_rows,
        not_run_row,
        summarize,
        write_outputs,
    )

    check_format(fmt)
    if throughput:
        from kforge_search.cli.throughput import run_throughput

        _refuse("--throughput", set=bool(overrides), resume=resume, screen=bool(screen),
                                search_efficiency=search_efficiency, jobs=jobs != 1,
                                shard=shard is not None, merge=bool(merge),
                                rest_of=rest_of is not None, gpus=bool(gpus))  # fmt: skip
        for name, value in (("--budget", budget), ("--lineages", lineages), ("--per-gpu", per_gpu)):
            if value is not None and value < 1:
                fail(f"{name} {value}: needs at least 1")
        run_throughput(
            suite, match, platform, policy or "loose", lineages or 2, budget, sizes, seed,
            10.0 if duration is None else duration, out, fmt, per_gpu,
        )  # fmt: skip
        return
    for name, value in (("--duration", duration), ("--lineages", lineages), ("--per-gpu", per_gpu)):
        if value is not None:
            fail(f"{name} is an option of --throughput", f"add --throughput, or leave out {name}")
    if suite is None:
        fail("give a SUITE", "a bundled suite (level2), one of its problems, a file or a folder")
    assert suite is not None
    policy = policy or "strict"
    budget = 4 if budget is None else budget
    log = console if fmt == "table" else err  # progress: json and csv get stdout alone
    if budget < 1:
        fail(f"--budget {budget}: needs at least 1 evaluation per problem")
    if jobs < 1:
        fail(f"--jobs {jobs}: needs at least 1")
    if jobs > 1 and screen:
        fail("--screen times genomes in this process: use it with --jobs 1")
    if screen < 0:
        fail(f"--screen {screen}: needs 0 (off) or more genomes")
    plat = platform_or_fail(platform, here=not merge)  # a merge runs nothing: any machine
    if gpus:
        from kforge_search.cli.bench_gpus import bench_argv, on_gpus

        argv = bench_argv(suite, platform, policy, budget, sizes, overrides, match, seed, screen,
                          resume, rest_of, jobs)  # fmt: skip
        _refuse("--gpus", shard=shard is not None, merge=bool(merge),
                search_efficiency=search_efficiency)  # fmt: skip
        on_gpus(gpus, plat, out, fmt, argv, lambda line: err.print(line, markup=False,
                highlight=False, soft_wrap=True))  # fmt: skip
        return
    try:
        threads = compile_threads(jobs, _shard(shard)[1] if shard else 1)
        evaluator = Evaluator(EvalConfig(policy=policy, compile_threads=threads))
    except ValueError as exc:
        fail(str(exc))
    problems, skipped = suite_problems(suite, sizes, parse_overrides(overrides), match)
    sources = [*(merge or []), *([rest_of] if rest_of and merge else [])]
    try:
        if rest_of and not merge:
            earlier = _rows_of(rest_of, "--rest-of", policy, plat.name)
            problems = [p for p in problems if p.name not in earlier]
            if not problems:
                err.print(f"nothing to run: {rest_of} has a row for every problem")
                evaluator.close()
                return
        if shard is not None:
            index, count = _shard(shard)
            problems = problems[index::count]
        done = load_rows(Path(out) / "bench.json", policy, plat.name) if resume else {}
        for folder in sources:
            kept = _rows_of(folder, "--rest-of" if folder == rest_of else "--merge", policy,
                            plat.name)  # fmt: skip
            # the first run with a row for a problem gives its row, and its best kernel
            # (before, a later run's kernel overwrote it: a table whose 6_Matmul_with_large_K
            # row said bf16 beside the bf16x3 kernel of the run merged after it)
            taken = {name: row for name, row in kept.items() if name not in done}
            done.update(taken)
            _copy_best(Path(folder), Path(out), taken)
    except BenchError as exc:
        fail(str(exc), "use another --out, or leave out --resume / --merge / --rest-of")
    for line in skipped:
        err.print(f"[yellow]skipped[/] {line}", highlight=False, soft_wrap=True)
    if not problems:
        fail(f"no problems in {suite}", "pass a directory of problems, e.g. problems/level2")
    if search_efficiency:
        from kforge_search.cli.efficiency import run_efficiency

        run_efficiency(problems, plat, policy, budget, trials, out, fmt)
        return
    if merge:
        evaluator.close()
        rows = [done.get(p.name) or not_run_row(p) for p in problems]
        devices = sorted({_device_of(Path(f)) for f in sources} - {""})
        meta = {"suite": suite, "platform": plat.name, "policy": policy, "merged": sources,
                "device": ", ".join(devices)}  # fmt: skip
        summary = summarize(rows)
        paths = write_outputs(rows, summary, Path(out), meta)
        _emit(rows, fmt)
        _report(summary, policy, paths, fmt)
        return
    # with jobs, a problem's drafts may go side by side on idle jobs' evaluators (Lender)
    agent = BuiltinAgent() if jobs == 1 else OneAtATime(BuiltinAgent(SIDE_BY_SIDE))
    rows: list[Any] = [done[p.name] for p in problems if p.name in done]
    device, started = "", time.monotonic()
    order = {p.name: i for i, p in enumerate(problems)}
    for row in rows:
        log.print(f"[dim]{row.problem}: kept from the earlier run[/]", highlight=False)

    # drafts evaluated in this run (the finished problems'), and how many of them were not
    # checked at the unseen sizes (slower than their problem's best kept draft)
    counts = {"evaluations": 0, "unseen_skipped": 0}
    written: dict[str, Any] = {}  # the meta of bench.json as last written

    def save(rows: list[Any], complete: bool) -> tuple[Any, Path, Path]:
        seconds = round(time.monotonic() - started, 1)
        meta = {
            "suite": suite,
            "platform": plat.name,
            "policy": policy,
            "budget": budget,
            "screen": screen,
            "jobs": jobs,
            "sizes": sizes or "default",
            "shard": shard or "",
            "merged": list(merge or []),
            "rest_of": rest_of or "",
            "device": device,
            "seconds": seconds,
            "complete": complete,
            "resumed": sorted(done),
            **counts,
            "evaluations_per_minute": round(60 * counts["evaluations"] / max(seconds, 1e-9), 2),
        }
        written.update(meta)
        rows = sorted(rows, key=lambda r: order.get(r.problem, len(order)))
        summary = summarize(rows)
        return (summary, *write_outputs(rows, summary, Path(out), meta))

    def finished(row: Any, parents: list[Any]) -> None:
        nonlocal device
        device = device or next((p.result.device_name for p in parents), "")
        counts["evaluations"] += len(parents)
        counts["unseen_skipped"] += sum(
            any(w.startswith(UNSEEN_SKIPPED) for w in p.result.warnings) for p in parents
        )
        rows.append(row)
        if row.verified:
            chosen = best_parent(parents)
            assert chosen is not None
            best_dir = Path(out) / "best"
            best_dir.mkdir(parents=True, exist_ok=True)
            (best_dir / f"{row.problem.replace('/', '__')}.py").write_text(chosen.draft.source)
        _one_row(row, log)
        save(rows, complete=False)  # after every problem: a run cut short keeps its rows

    todo = [p for p in problems if p.name not in done]
    run = functools.partial(
        bench_problem, platform=plat, policy=policy, budget=budget, agent=agent, seed=seed,
        screen=screen, log=log,
    )  # fmt: skip
    try:
        if jobs == 1:
            for i, problem in enumerate(todo, 1):
                with log.status(f"[{i}/{len(todo)}] {problem.name} ...", spinner="dots"):
                    finished(*run(problem, evaluator))
        else:
            shares, free = device_shares(plat, agent), free_share(plat.device_kind)
            in_parallel(todo, run, evaluator, jobs, finished, shares, free)
    except KeyboardInterrupt:
        evaluator.close()
        _interrupted(save(rows, complete=False)[1], len(rows), len(problems), jobs > 1)
    finally:
        evaluator.close()  # its warm spare child ends now, not when this process does
    rows.sort(key=lambda r: order.get(r.problem, len(order)))  # the suite's order
    summary, json_path, csv_path = save(rows, complete=True)
    _emit(rows, fmt)
    _report(summary, policy, (json_path, csv_path), fmt)
    note(
        f"{written['evaluations']} evaluations in {written['seconds']:.0f} s "
        f"({written['evaluations_per_minute']:.1f} a minute); {written['unseen_skipped']} of "
        "them no faster than their problem's best kept draft, so not checked at the unseen "
        "sizes",
        fmt,
    )


def _interrupted(json_path: Path, kept: int, total: int, threads: bool) -> None:
    """Ctrl-C (SIGINT): the rows so far stay in bench.json and the problems in flight are
    dropped (--resume runs them). With --jobs, this process ends at once: its threads are
    inside evaluations (minutes each at published sizes), and the evaluators' keepers end
    their children as soon as it is gone."""
    import os
    import sys

    err.print(
        f"[yellow]interrupted[/]: {kept} of {total} problems kept in {json_path}; "
        "--resume runs the others",
        highlight=False,
    )
    if threads:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    raise typer.Exit(130)


def _device_of(folder: Path) -> str:
    """The device a run's bench.json names ("" where it names none)."""
    import json

    try:
        return str(json.loads((folder / "bench.json").read_text())["meta"].get("device", ""))
    except (OSError, ValueError, KeyError):
        return ""


def _report(summary: Any, policy: str, paths: tuple[Path, Path], fmt: str) -> None:
    json_path, csv_path = paths
    note(
        f"geomean speedup {_fmt(summary.geomean_speedup, '.2f')}x over {summary.verified} verified"
        f" of {summary.problems} ({_fmt(summary.geomean_all, '.2f')}x over all {summary.problems},"
        f" the others counted as 1.0x), each over its peer of record (the fastest PyTorch setting"
        f" that passes {policy}); over fp32 eager / compile only "
        f"{_fmt(summary.geomean_fp32, '.2f')}x ({_fmt(summary.geomean_all_fp32, '.2f')}x over all);"
        f" fast_0 {summary.fast_0:.2f}, fast_1 {summary.fast_1:.2f}"
        + (
            f" ({summary.fast_1_by_little} of its rows by 1% or less)"
            if summary.fast_1_by_little
            else ""
        )
        + f", fast_1.5 {summary.fast_1_5:.2f}; median roofline "
        f"{_fmt(summary.median_roofline, '.0%')}"
        + (f"; {summary.unrunnable} could not be run" if summary.unrunnable else "")
        + (f"; {summary.not_run} not run" if summary.not_run else "")
        + (
            f"; {summary.loaded} timed on a loaded host (not the machine's own figures: "
            "see each row's message)"
            if summary.loaded
            else ""
        )
        + f"\n{json_path}\n{csv_path}",
        fmt,
    )
