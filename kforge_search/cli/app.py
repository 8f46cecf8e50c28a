"""The `kforge` command line. Heavy modules (torch, ray) are imported inside commands only."""

from __future__ import annotations

import functools
import json
from typing import Annotated

import typer
from rich.text import Text

from kforge_search.cli.common import (
    SetOpt,
    SizesOpt,
    console,
    err,
    fail,
    load,
    platform_or_fail,
)
from kforge_search.cli.db import db_app
from kforge_search.cli.output import Column, FormatOpt, check_format, emit, note

app = typer.Typer(
    help="kforge-search: search, verify and time fast kernels for PyTorch programs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
problems_app = typer.Typer(help="List and show KernelBench-format problems.", no_args_is_help=True)
app.add_typer(problems_app, name="problems")
app.add_typer(db_app, name="db")


@problems_app.command("list")
def problems_list(
    path: Annotated[str | None, typer.Argument(help="a problem file or directory")] = None,
    fmt: FormatOpt = "table",
) -> None:
    """List problems (the bundled suite by default) with their ids and size sets."""
    from kforge_search.problem import ProblemError, find_problems

    check_format(fmt)
    try:
        problems, skipped = find_problems(path)
    except ProblemError as exc:
        fail(str(exc))
    columns = ("id", "name", Column("size_sets", "size sets"), "constants")
    rows = [(p.id, p.name, [name for name, _ in p.size_sets], dict(p.constants)) for p in problems]
    emit(columns, rows, fmt)
    note(f"{len(problems)} problems", fmt)
    for line in skipped:
        err.print(f"[yellow]skipped[/] {line}", highlight=False)


@problems_app.command("show")
def problems_show(
    problem: Annotated[str, typer.Argument(help="id, bundled name or path")],
    sizes: SizesOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Show a problem: id, path, sizes and source."""
    p = load(problem, sizes, overrides)
    console.print(f"[bold]{p.name}[/]  id {p.id}\npath {p.path}")
    console.print(f"sizes ({p.size_set}): " + ", ".join(f"{k}={v}" for k, v in p.sizes.items()))
    for name, values in p.size_sets:
        console.print(f"size set {name}: " + ", ".join(f"{k}={v}" for k, v in values))
    console.print(p.source, markup=False, highlight=False)


@app.command("eval")
def eval_cmd(
    candidate: Annotated[str, typer.Argument(help="a Python file that defines ModelNew")],
    problem: Annotated[str, typer.Option("--problem", help="problem file, bundled name or id")],
    platform: Annotated[str, typer.Option("--platform", help="see `kforge platforms`")],
    policy: Annotated[str, typer.Option(help="numeric policy: strict or loose")] = "strict",
    sizes: SizesOpt = None,
    overrides: SetOpt = None,
    baselines: Annotated[
        bool, typer.Option(help="time eager and torch.compile baselines (cached)")
    ] = True,
    reduced_precision: Annotated[
        bool,
        typer.Option(
            help="also time each baseline at the platform's reduced precision (TF32 on CUDA, "
            "bf16 matmuls on CPU), a peer where it passes the policy on the problem"
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    db: Annotated[
        str | None, typer.Option("--db", help="record the result in this kernel database")
    ] = None,
) -> None:
    """Evaluate one candidate: static check, build, verify, time, speedups."""
    from pathlib import Path

    from kforge_search.evaluator import EvalConfig, Evaluator
    from kforge_search.evaluator.report import format_report
    from kforge_search.problem import ProblemError

    if not Path(candidate).is_file():
        fail(f"no candidate file at {candidate}", "pass the path of a .py file defining ModelNew")
    p = load(problem, sizes, overrides)
    plat = platform_or_fail(platform)
    try:
        # one evaluation: a warm spare for a next candidate would never be used
        config = EvalConfig(
            policy=policy,
            baselines=("eager", "compile") if baselines else (),
            reduced_precision=reduced_precision,
            spare_child=False,
        )
    except ValueError as exc:
        fail(str(exc))
    try:
        with console.status(f"evaluating {candidate} on {plat.name} ...", spinner="dots"):
            result = Evaluator(config).evaluate(candidate, p, plat)
    except ProblemError as exc:
        fail(str(exc), "the problem itself is broken: fix it before evaluating candidates")
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        color = "green" if result.ok else "red"
        console.print(f"[bold {color}]{result.status.value}[/]")
        console.print(format_report(result), markup=False, highlight=False, soft_wrap=True)
    if db is not None:
        from kforge_search.cli.db import record_eval

        record_eval(Path(db), result, Path(candidate), p, config)
    raise typer.Exit(0 if result.ok else 1)


@app.command("baseline")
def baseline_cmd(
    problem: Annotated[str, typer.Argument(help="problem file, bundled name or id")],
    platform: Annotated[str, typer.Option("--platform")],
    sizes: SizesOpt = None,
    overrides: SetOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Time the reference in eager mode and under torch.compile, in fp32 and at the
    platform's reduced precision, each checked against the reference at the problem's sizes
    and at its unseen sizes (cached)."""
    from kforge_search.evaluator import Evaluator, peers
    from kforge_search.evaluator.policy import POLICIES

    check_format(fmt)
    p = load(problem, sizes, overrides)
    plat = platform_or_fail(platform)
    evaluator = Evaluator()
    try:
        with err.status("timing baselines ...", spinner="dots"):
            ref = evaluator.reference(p, plat)
            found = evaluator.baselines(p, plat, ref)
    finally:
        evaluator.close()
    if not found:
        fail(f"{plat.name} times are not meaningful: no baselines")
    ms = functools.partial(Column, show=lambda v: "-" if v is None else f"{v:.4f}")
    columns = ("baseline", ms("p20_ms", "p20 ms"), ms("p50_ms", "p50 ms"),
               ms("p80_ms", "p80 ms"), "runs", "cached", "passes", "error")  # fmt: skip
    rows = []
    for b in found:
        t = b.timing
        times = (t.p20_ms, t.p50_ms, t.p80_ms, t.runs) if t else (None, None, None, None)
        # the policies it is checked and admissible under (at the unseen sizes too), and why
        # not under the others (peers.refusal)
        passes = [p for p in POLICIES if b.check(p) and not peers.refusal(b, p)]
        passes = "reference" if b.kind == "eager" else passes
        rows.append((b.kind, *times, b.cached, passes, b.error or peers.refusals(b)))
    note(f"{p.name} on {plat.name} ({ref.device_name}, torch {ref.torch_version})", fmt)
    emit(columns, rows, fmt)


@app.command("platforms")
def platforms_cmd(fmt: FormatOpt = "table") -> None:
    """List platforms and whether each can run on this machine."""
    from kforge_search.platforms import PLATFORMS, availability

    check_format(fmt)
    yes_no = Column("available", show=lambda ok: Text("yes", "green") if ok else Text("no", "red"))
    columns = ("platform", "device", "language", "timing", yes_no, "why")
    rows = []
    for p in PLATFORMS.values():
        state = availability(p)
        rows.append((p.name, p.device_kind, p.language, p.timing, state.ok, state.reason))
    emit(columns, rows, fmt)


def _register() -> None:
    from kforge_search.cli.bench import bench_cmd
    from kforge_search.cli.export import export_cmd
    from kforge_search.cli.search import search_cmd
    from kforge_search.cli.seed import seed_cmd

    app.command("bench")(bench_cmd)
    app.command("search")(search_cmd)
    app.command("seed")(seed_cmd)
    app.command("export")(export_cmd)


_register()


def main() -> None:
    import os

    from kforge_search.paths import pycache_dir

    # the processes this command starts (Ray's workers, evaluators' children) share compiled
    # bytecode: where the interpreter's packages ship without it, each would compile torch
    # (written, even where the environment says PYTHONDONTWRITEBYTECODE: it is kforge's cache
    # folder, and a prefix nobody writes makes every process compile: sandbox.writable_bytecode)
    if "PYTHONPYCACHEPREFIX" not in os.environ:
        os.environ["PYTHONPYCACHEPREFIX"] = str(pycache_dir())
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    app()
