"""`kforge db`: query, inspect, export and import the kernel database (`app.add_typer(db_app,
name="db")`). duckdb and pyarrow are imported inside commands only: `kforge --help` is instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from kforge_search.cli.output import Column, FormatOpt, check_format, emit, note

if TYPE_CHECKING:
    from kforge_search.evaluator.result import EvalResult
    from kforge_search.problem import Problem

db_app = typer.Typer(
    help="The kernel database (DuckDB): query, best kernels, lineage, export/import, stats.",
    no_args_is_help=True,
)
console = Console()
err = Console(stderr=True)

DEFAULT_DB = Path("kforge.duckdb")
DbOpt = Annotated[
    Path, typer.Option("--db", envvar="KFORGE_DB", help="the database file (or $KFORGE_DB)")
]


def _fail(message: str) -> NoReturn:
    """Store errors say what to do in their message: print it and exit 2."""
    err.print(f"[bold red]Error:[/] {message}", highlight=False)
    raise typer.Exit(2)


def _store_errors() -> tuple[type[Exception], ...]:
    from kforge_search.store.connection import StoreError
    from kforge_search.store.schema import SchemaError
    from kforge_search.store.writer import WriteError

    return StoreError, SchemaError, WriteError


def _read(db: Path, query: Any, *args: Any) -> Any:
    """`query(reader, *args)` on a read-only open of `db`; store errors end the command."""
    from kforge_search.store.reader import Reader

    try:
        with Reader.open(db) as reader:
            return query(reader, *args)
    except _store_errors() as exc:
        _fail(str(exc))


def _bytes_as_size(value: Any) -> Any:
    return f"<{len(value)} bytes>" if isinstance(value, bytes) else value


def _cell(value: Any) -> str:
    if value is None or isinstance(value, bytes):
        return "" if value is None else _bytes_as_size(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _record(title: str, fields: dict[str, Any]) -> None:
    """One row as `name: value` lines (for rows with many columns)."""
    console.print(f"[bold]{title}[/]")
    for name, value in fields.items():
        if value not in (None, "", [], {}):
            console.print(
                f"  {name}: {_cell(value)}", markup=False, highlight=False, soft_wrap=True
            )


@db_app.command("query")
def query_cmd(
    sql: Annotated[str, typer.Argument(help="SQL to run read-only, e.g. 'SELECT ...'")],
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Run a read-only SQL query and print the result as a table, CSV or JSON."""
    check_format(fmt)
    result = _read(db, lambda reader: reader.query(sql))
    emit(result.columns, result.rows, fmt)
    note(f"{len(result.rows)} rows", fmt)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


@db_app.command("best")
def best_cmd(
    problem: Annotated[str | None, typer.Option(help="problem id (prefix) or name")] = None,
    platform: Annotated[str | None, typer.Option(help="e.g. cuda-triton")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 10,
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """The best verified kernels (by speedup vs eager), optionally of a problem/platform."""
    from kforge_search.store.queries import best_kernels

    check_format(fmt)
    found = _read(db, best_kernels, problem, platform, limit)
    columns = ("candidate", "problem", "platform", "lineage", Column("generation", "gen"),
               Column("speedup_eager", "x eager", _x), Column("speedup_compile", "x compile", _x),
               Column("p50_ms", "p50 ms"), "device")  # fmt: skip
    rows = [
        (h.candidate_id, h.problem_name or h.problem_id, h.platform, h.lineage_id,
         h.generation, h.speedup_eager, h.speedup_compile, h.p50_ms, h.device_name)
        for h in found
    ]  # fmt: skip
    emit(columns, rows, fmt)
    if not found:
        err.print("no verified kernels match", highlight=False)


@db_app.command("lineage")
def lineage_cmd(
    candidate: Annotated[str, typer.Argument(help="candidate id (or a unique prefix)")],
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """A candidate's ancestry (parents, recursively) with each step's status and speedups."""
    from kforge_search.store.queries import lineage

    check_format(fmt)
    columns = ("depth", "candidate", Column("generation", "gen"), Column("pass_kind", "pass"),
               "agent", "model", "status", Column("speedup_eager", "x eager", _x),
               Column("speedup_compile", "x compile", _x), "parents")  # fmt: skip
    rows = [
        (s.depth, s.candidate_id, s.generation, s.pass_kind, s.agent, s.model, s.best_status,
         s.speedup_eager, s.speedup_compile, list(s.parent_ids))
        for s in _read(db, lineage, candidate)
    ]  # fmt: skip
    emit(columns, rows, fmt)


@db_app.command("runs")
def runs_cmd(
    limit: Annotated[int, typer.Option(help="how many, newest first")] = 20,
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """The runs, newest first: kind, state (a running run whose driver died shows
    interrupted: `kforge search --resume RUN` continues it), evaluations, LLM calls."""
    from kforge_search.store.runs import list_runs

    check_format(fmt)
    llm = (Column("llm_ok", "llm ok"), Column("llm_failed", "llm failed"))
    columns = ("run", "kind", "state", "started", "ended", "evaluations", "verified", *llm,
               "problems")  # fmt: skip
    rows = [
        (r.id, r.kind, r.state, r.started_at, r.ended_at, r.evaluations, r.verified,
         r.llm_ok, r.llm_failed, r.problems)
        for r in _read(db, list_runs, limit)
    ]  # fmt: skip
    emit(columns, rows, fmt)


def _candidate_or_run(reader: Any, ref: str) -> Any:
    """A candidate's detail, or a run's when no candidate id starts with `ref`."""
    from kforge_search.store.queries import candidate_detail
    from kforge_search.store.runs import run_detail

    def count(table: str) -> int:
        sql = f"SELECT count(*) FROM {table} WHERE starts_with(id, ?)"
        return int(reader.query(sql, [ref]).rows[0][0])

    if not count("candidates") and count("runs"):
        return run_detail(reader, ref)
    return candidate_detail(reader, ref)


def _show_run(d: Any) -> None:
    """A run: its state, evaluations per status and lineage, LLM calls and why they failed."""
    r = d.run
    why = ""
    if r["state"] == "interrupted" and r["status"] == "running":
        why = f" (its driver is gone: process {r['pid']} on {r['host']}, last heartbeat "
        why += f"{r['heartbeat_at'] or r['started_at']})"
    console.print(f"[bold]run {r['id']}[/]  {r['kind']}  {r['state']}{why}", highlight=False)
    ended = r["ended_at"] or "-"
    console.print(f"started {r['started_at']}  ended {ended}  kforge-search {r['tool_version']}")
    console.print(f"config {r['config']}", markup=False, highlight=False, soft_wrap=True)
    if d.statuses.rows:
        emit(("status", "evaluations"), d.statuses.rows)
    if d.lineages.rows:
        emit(("lineage", "evaluations", "verified", Column("best_x_eager", "best x eager")),
             d.lineages.rows)  # fmt: skip
    if d.llm.rows:
        emit(d.llm.columns, d.llm.rows)
    calls: dict[str, list[tuple[str, str]]] = {}
    for lineage, _, status, _, _, _, _, _, last_error in d.llm.rows:
        calls.setdefault(lineage or "-", []).append((status, last_error or ""))
    for lineage, seen in calls.items():
        if all(status != "ok" for status, _ in seen):
            console.print(
                f"lineage {lineage}: every LLM call failed; the last: {seen[-1][1]}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


@db_app.command("show")
def show_cmd(
    candidate: Annotated[
        str, typer.Argument(help="a candidate id or a run id (or a unique prefix)")
    ],
    source: Annotated[bool, typer.Option(help="print the source")] = True,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """A candidate (its source, evaluations, profiles and recommendations) or a run (its
    state, evaluations per lineage, LLM calls per lineage and why they failed)."""
    d = _read(db, _candidate_or_run, candidate)
    if not hasattr(d, "candidate"):
        _show_run(d)
        return
    c = d.candidate
    console.print(f"[bold]candidate {c['id']}[/]  problem {c['problem_id']}  {c['platform']}")
    console.print(
        f"lineage {c['lineage_id']}  generation {c['generation']}  {c['pass_kind']}  "
        f"parents {', '.join(c['parent_ids'] or []) or '-'}  agent {c['agent'] or '-'}  "
        f"model {c['model'] or '-'}",
        highlight=False,
    )
    for row in d.evaluations.dicts():
        _record(f"evaluation {row.pop('id')}", row)
    for row in d.profiles.dicts():
        _record(f"profile {row.pop('id')}", row)
    for _, analysis, suggestions, model, _ in d.recommendations.rows:
        console.print(
            f"[bold]recommendation[/] ({model or '?'})\n{analysis}\n{suggestions}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if source:
        console.print("--- source ---")
        console.print(c["source"], markup=False, highlight=False, soft_wrap=True)


@db_app.command("stats")
def stats_cmd(fmt: FormatOpt = "table", db: DbOpt = DEFAULT_DB) -> None:
    """Rows per table, evaluations per status, candidates and verified ones per platform.

    As json or csv: one list, each row saying which count it is (`count_of`: rows of a
    table, evaluations of a status, candidates of a platform with `verified`)."""
    from kforge_search.store.queries import stats

    check_format(fmt)
    s = _read(db, stats)
    size = db.stat().st_size / 2**20
    note(f"{db}  schema v{s.schema_version}  {size:.1f} MiB", fmt)
    if fmt == "table":
        emit(("table", "rows"), s.rows)
        emit(("status", "evaluations"), s.statuses)
        emit(("platform", "candidates", "verified"), s.platforms)
        return
    rows = [("rows", table, n, None) for table, n in s.rows]
    rows += [("evaluations", status, n, None) for status, n in s.statuses]
    rows += [("candidates", platform, n, good) for platform, n, good in s.platforms]
    emit(("count_of", "name", "count", "verified"), rows, fmt)


@db_app.command("export")
def export_cmd(
    directory: Annotated[Path, typer.Argument(help="where the Parquet files go")],
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Write every table to DIR/<table>.parquet (and DIR/manifest.json)."""
    from kforge_search.store.io import export_db

    check_format(fmt)
    counts = _read(db, export_db, directory)
    emit(("table", "rows"), [(c.table, c.rows) for c in counts], fmt)
    note(f"exported to {directory}", fmt)


@db_app.command("import")
def import_cmd(
    directory: Annotated[Path, typer.Argument(help="a directory written by `kforge db export`")],
    fmt: FormatOpt = "table",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Insert an export's rows; rows already present (same id) are skipped."""
    from kforge_search.store.io import import_db
    from kforge_search.store.writer import Writer

    check_format(fmt)
    try:
        with Writer(db) as writer:
            counts = import_db(writer, directory)
    except _store_errors() as exc:
        _fail(str(exc))
    rows = [(c.table, c.rows, c.inserted) for c in counts]
    emit(("table", Column("rows_read", "rows read"), "inserted"), rows, fmt)


@db_app.command("migrate")
def migrate_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Create the database, or bring its schema up to this kforge-search's version."""
    from kforge_search.store.writer import Writer

    try:
        with Writer(db) as writer:
            console.print(f"{db}: schema version {writer.version}", highlight=False)
    except _store_errors() as exc:
        _fail(str(exc))


@db_app.command("bench")
def bench_cmd(
    candidates: Annotated[int, typer.Option(help="candidates to insert")] = 100_000,
    evaluations: Annotated[int, typer.Option(help="evaluations to insert")] = 300_000,
    problems: Annotated[int, typer.Option(help="synthetic problems")] = 200,
    batch_rows: Annotated[int, typer.Option(help="rows per transaction")] = 4_000,
    repeats: Annotated[int, typer.Option(help="timed runs per query")] = 20,
    db: Annotated[Path | None, typer.Option("--db", help="a new file (default: temp)")] = None,
    fmt: FormatOpt = "table",
) -> None:
    """Fill a new database with a synthetic load; print insert throughput and query times."""
    import functools
    import tempfile

    from rich.progress import Progress

    from kforge_search.store.load_test import BenchConfig, run_bench

    check_format(fmt)
    try:
        cfg = BenchConfig(candidates, evaluations, problems, batch_rows, repeats)
    except ValueError as exc:
        _fail(str(exc))
    with tempfile.TemporaryDirectory(prefix="kforge-bench-") as tmp:
        path = db or Path(tmp) / "bench.duckdb"
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("inserting", total=candidates + evaluations)
            try:
                report = run_bench(path, cfg, lambda n: progress.advance(task, n))
            except (FileExistsError, *_store_errors()) as exc:
                _fail(str(exc))
    note(
        f"inserted {report.rows:,} rows in {report.batches} batches: {report.write_s:.1f} s "
        f"in the writer, [bold]{report.rows_per_s:,.0f} rows/s[/] (records built in "
        f"{report.generate_s:.1f} s, not counted); file {report.file_bytes / 2**20:.0f} MiB",
        fmt,
    )
    ms = functools.partial(Column, show=lambda v: f"{v:.1f}")
    rows = [(q.name, q.p50_ms, q.max_ms, q.rows) for q in report.queries]
    emit(("query", ms("p50_ms", "p50 ms"), ms("max_ms", "max ms"), "rows"), rows, fmt)


def record_eval(
    db: Path, result: EvalResult, candidate: Path, problem: Problem, config: Any
) -> None:
    """For `kforge eval --db`: store the result, its candidate and a run, or fail clearly."""
    from kforge_search.store.from_eval import eval_run, record_eval_result
    from kforge_search.store.writer import Writer

    run = eval_run(config, result, candidate=str(candidate), problem=problem.name)
    try:
        with Writer(db) as writer:
            recorded = record_eval_result(writer, result, candidate.read_text(), problem, run=run)
    except (*_store_errors(), ValueError) as exc:
        _fail(f"the result was not recorded in {db}: {exc}")
    err.print(
        f"recorded evaluation {recorded.evaluation_id} of candidate {recorded.candidate_id} "
        f"in {db}",
        highlight=False,
    )
