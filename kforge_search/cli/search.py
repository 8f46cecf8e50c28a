"""`kforge search PROBLEMS... --platform P`: lineages of the builtin agent over Ray evaluator
pools, every evaluation recorded by the single database writer. Registered in cli/app.py.
"""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kforge_search.cli.db import DEFAULT_DB, DbOpt
from kforge_search.cli.live import Progress

console = Console()


def _agents(
    agent: str,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    cache: str | None,
    supervision: str = "auto",
) -> tuple[Any, ...]:
    """builtin: the builtin agent; llm: LLM lineages, every second one a builtin seed
    lineage whose kernels the LLM lineages get as references."""
    from kforge_search.agents import BuiltinAgent
    from kforge_search.agents.llm import LLMAgent
    from kforge_search.cli.app import fail
    from kforge_search.llm.config import LLMConfig

    if agent == "builtin":
        return (BuiltinAgent(),)
    if agent != "llm":
        fail(f"--agent {agent}: use builtin or llm")
    if not model:
        fail("--agent llm needs --model", "e.g. --model gpt-4o, or a local server's model name")
    assert model is not None
    kind = provider or (
        "compatible" if base_url else "anthropic" if model.startswith("claude") else "openai"
    )
    try:
        config = LLMConfig(kind, model, base_url=base_url)
    except ValueError as exc:
        fail(str(exc))
    try:
        writer = LLMAgent(config, cache_dir=cache, supervision=supervision)
    except ValueError as exc:
        fail(str(exc))
    return (writer, BuiltinAgent())  # lineage #0 is an LLM's


def _load_resume(db: str, ref: str) -> Any:
    """The run to resume, read before the writer actor takes the database file."""
    from kforge_search.cli.app import fail
    from kforge_search.search.resume import ResumeError, load_run
    from kforge_search.store.reader import Reader

    try:
        with Reader.open(db) as reader:
            return load_run(reader, ref)
    except ResumeError as exc:
        fail(str(exc))
    except Exception as exc:  # a missing or unreadable file
        fail(f"cannot read {db}: {exc}", "pass the --db the run was recorded in")


def _records(lineage: Any, step: Any, run_id: str, replayed: set[str]) -> list[Any]:
    """The store rows of one lineage step: problem, hardware, candidate, evaluation, ...
    (not for evaluations replayed from the database: they are there already)."""
    from kforge_search.store.ids import candidate_id

    rows: list[Any] = []
    reused = step.reused or (False,) * len(step.members)
    for member, draft, result, again in zip(
        step.members, step.drafts, step.results, reused, strict=True
    ):
        if again or member.candidate_id in replayed:  # recorded with the first evaluation
            continue
        rows.extend(
            _evaluation_rows(lineage.problem, member, draft, result, step.pass_kind, run_id)
        )
        if result.ok and result.profile is not None and not draft.model:
            rows.extend(_rule_recommendation(lineage, draft, result, member.candidate_id))
    platform = lineage.platform.name
    sources = {p.draft.id: p.draft.source for p in lineage.parents}
    for draft in step.calls:  # every LLM call of the step, also one that wrote a repeat
        rows.append(_call_row("writer", draft, run_id, candidate_id(draft.source, platform)))
        analysis = draft.analysis
        if analysis is None or not draft.parents or draft.parents[0] not in sources:
            continue
        analyzed = candidate_id(sources[draft.parents[0]], platform)
        rows.append(_recommendation(analysis, analyzed))
        if analysis.model:
            rows.append(_call_row("analyst", analysis, run_id, analyzed))
    return rows


def _call_row(role: str, call: Any, run_id: str, cid: str) -> Any:
    """An llm_calls row from what carries a call's cost (a Draft or an Analysis)."""
    from kforge_search.store.records import LlmCallRecord

    return LlmCallRecord(
        role=role,
        model=call.model,
        status="ok",
        tokens_in=call.tokens_in,
        tokens_out=call.tokens_out,
        cost_usd=call.cost_usd,
        run_id=run_id,
        candidate_id=cid,
    )


@functools.cache
def _rules_analyst() -> Any:
    """One rules-only analyst per process (it caches each problem's work)."""
    from kforge_search.agents.analyst import Analyst

    return Analyst()


def _rule_recommendation(lineage: Any, draft: Any, result: Any, cid: str) -> list[Any]:
    """Lineages without an LLM: the rule-based analysis of each profiled candidate."""
    from kforge_search.agents.base import Parent

    parent = Parent(draft, result)
    report = _rules_analyst().report(lineage.problem, lineage.platform, lineage.policy, parent)
    return [] if isinstance(report, str) else [_recommendation(report.analysis, cid)]


def _recommendation(analysis: Any, analyzed: str) -> Any:
    from kforge_search.store.ids import content_id
    from kforge_search.store.records import RecommendationRecord

    return RecommendationRecord(
        id=content_id(analyzed, analysis.agent, analysis.model, analysis.text()),
        candidate_id=analyzed,
        analysis=f"{analysis.bottleneck}: {analysis.summary}",
        suggestions=analysis.suggestions_json(),
        agent=analysis.agent,
        model=analysis.model,
    )


def _summary(search: Any) -> Table:
    table = Table("problem", "platform", "lineages", "evaluated", "verified", "best speedup")
    groups: dict[tuple[str, str], list[Any]] = {}
    for lineage in search.lineages:
        groups.setdefault((lineage.problem.name, lineage.platform.name), []).append(lineage)
    for (problem, platform), lineages in sorted(groups.items()):
        unique = {m.candidate_id: m for lin in lineages for m in lin.members}
        members = list(unique.values())
        good = [m for m in members if m.verified]
        best = max((m.speedup or 0.0 for m in good), default=None)
        alive = sum(1 for lin in lineages if lin in search.alive)
        table.add_row(
            problem,
            platform,
            f"{alive} alive / {len(lineages)}",
            str(len(members)),
            str(len(good)),
            f"{best:.2f}x" if best else "-",
        )
    return table


def search_cmd(
    problems: Annotated[
        list[str] | None,
        typer.Argument(help="problem files, names or id prefixes (with --resume: the run's)"),
    ] = None,
    platform: Annotated[
        list[str] | None,
        typer.Option("--platform", help="platform(s) to search; repeat for several"),
    ] = None,
    lineages: Annotated[int, typer.Option(help="lineages per problem and platform")] = 2,
    functional_passes: Annotated[
        int,
        typer.Option(help="steps a lineage may take to a verified kernel before it gives up"),
    ] = 5,
    generations: Annotated[
        int | None, typer.Option(help="generations at most (default 3; with --resume: the run's)")
    ] = None,
    max_candidates: Annotated[
        int | None, typer.Option(help="stop after this many evaluations")
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(help="stop after this much wall clock (checked between generations)"),
    ] = None,
    max_gpu_minutes: Annotated[
        float | None,
        typer.Option(help="stop after this much evaluation time on GPU platforms"),
    ] = None,
    agent: Annotated[
        str, typer.Option(help="builtin, or llm: LLM lineages beside a builtin seed lineage")
    ] = "builtin",
    model: Annotated[str | None, typer.Option(help="--agent llm: the model name")] = None,
    provider: Annotated[
        str | None,
        typer.Option(help="openai, anthropic or compatible (default: from --model/--base-url)"),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
    ] = None,
    max_llm_tokens: Annotated[
        int | None, typer.Option(help="stop when the LLM calls have used this many tokens")
    ] = None,
    max_usd: Annotated[
        float | None, typer.Option(help="stop when the LLM calls have cost this much")
    ] = None,
    llm_cache: Annotated[
        str | None, typer.Option(help="a folder of cached replies (reproducible reruns)")
    ] = None,
    supervision: Annotated[
        str,
        typer.Option(
            help="--agent llm, functional passes: auto, reference-free, cross-platform or one-shot"
        ),
    ] = "auto",
    profile: Annotated[
        bool | None,
        typer.Option(
            "--profile/--no-profile",
            help="profile verified candidates (torch.profiler, ncu where it runs, CPU counters) "
            "and store recommendations; default: on with --agent llm",
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="numeric policy: strict or loose")] = "strict",
    workers: Annotated[int, typer.Option(help="evaluator actors per platform")] = 1,
    per_gpu: Annotated[
        int,
        typer.Option(
            "--per-gpu",
            help="GPU platforms: evaluator actors sharing one GPU (they build and verify "
            "side by side and time one at a time)",
        ),
    ] = 1,
    db: DbOpt = DEFAULT_DB,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="a named size set of the problems (e.g. ci)")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="join this Ray cluster (default: RAY_ADDRESS, else a local one)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the search")] = 0,
    lineage_actors: Annotated[
        bool,
        typer.Option(
            help="run each lineage (and its agent) in its own Ray actor instead of the driver"
        ),
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option(
            help="continue this search run from the database: its settings, its stored "
            "evaluations replayed (not run again); --generations may extend it"
        ),
    ] = None,
) -> None:
    """Search for fast kernels: lineages, generations, evolutionary selection, recorded."""
    from kforge_search.cli.app import fail, load, platform_or_fail
    from kforge_search.evaluator import EvalConfig
    from kforge_search.search.budget import Budget
    from kforge_search.search.engine import SearchConfig

    agents = _agents(agent, model, provider, base_url, llm_cache, supervision)
    resumed = _load_resume(db, resume) if resume else None
    if resumed is not None:
        stored = resumed.settings
        if problems or platform:
            fail("--resume takes the run's problems and platforms: leave them out")
        problems, platform, sizes = stored["problems"], stored["platforms"], stored.get("sizes")
        kept = {k: stored[k] for k in vars(SearchConfig()) if k in stored}
        config_args = {**kept, **({"generations": generations} if generations else {})}
    else:
        if not problems or not platform:
            fail("give PROBLEMS and at least one --platform", "or --resume RUN")
        config_args = dict(
            lineages=lineages,
            generations=generations or 3,
            policy=policy,
            seed=seed,
            functional_passes=functional_passes,
        )
    assert problems is not None and platform is not None
    try:
        config = SearchConfig(**config_args)
        # no --max-candidates: the most the generations can evaluate (every lineage alive)
        alive = max(config.lineages, config.max_alive)
        most = len(problems) * len(platform) * alive * config.generations
        budget = Budget(
            max_candidates=max_candidates or most * config.drafts_per_step,
            wall_clock_s=None if max_minutes is None else max_minutes * 60,
            gpu_seconds=None if max_gpu_minutes is None else max_gpu_minutes * 60,
            llm_tokens=max_llm_tokens,
            money_usd=max_usd,
        )
        profiled = agent == "llm" if profile is None else profile
        eval_config = EvalConfig(policy=config.policy, profile=profiled)
    except (TypeError, ValueError) as exc:
        fail(str(exc))
    plats = [platform_or_fail(name) for name in platform]
    probs = [load(p, sizes, None) for p in problems]
    settings: dict[str, Any] = {"sizes": sizes, "agent": agent, "lineage_actors": lineage_actors}
    if resumed is not None:
        settings["resumed_from"] = resumed.run_id
    if model:
        settings["model"] = model
    _execute(
        Plan(probs, plats, config, budget, eval_config, settings, resumed, agents=agents),
        db=db,
        address=address,
        workers=workers,
        per_gpu=per_gpu,
    )


@dataclass(frozen=True)
class Plan:
    """What one search invocation runs (search, --resume and seed all end here)."""

    problems: list[Any]
    platforms: list[Any]
    config: Any  # SearchConfig
    budget: Any  # Budget
    eval_config: Any  # EvalConfig
    settings: dict[str, Any]  # stored with the run, besides problems, platforms and config
    resumed: Any = None  # search.resume.Resumed
    seeds: dict[tuple[str, str], Any] | None = None  # (problem id, platform) -> drafts
    references: dict[str, Any] | None = None  # problem id -> references
    agents: tuple[Any, ...] = ()  # lineage n gets agents[n % len]; () = the builtin agent


def _execute(plan: Plan, *, db: str, address: str | None, workers: int, per_gpu: int = 1) -> None:
    import ray

    from kforge_search.actors.lineage import RemoteLineage
    from kforge_search.actors.pool import EvaluatorPool
    from kforge_search.actors.writer import BatchedWriter, WriterUnavailable, start_writer
    from kforge_search.agents import BuiltinAgent
    from kforge_search.cli.app import fail
    from kforge_search.search.engine import Search
    from kforge_search.search.lineage import Lineage
    from kforge_search.search.resume import replaying
    from kforge_search.store.records import RunRecord

    probs, plats, config, budget = plan.problems, plan.platforms, plan.config, plan.budget
    resumed = plan.resumed
    owns_ray = not ray.is_initialized()  # a caller's cluster (tests, a notebook) is kept

    if owns_ray:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    pools: dict[str, Any] = {}
    writer = None
    status = "finished"
    try:
        try:
            writer = BatchedWriter(start_writer(db), batch_size=50)
        except WriterUnavailable as exc:
            fail(str(exc), "close the process that holds the database, or pass another --db")
        settings: dict[str, Any] = {
            "problems": [p.name for p in probs],
            "platforms": [p.name for p in plats],
            **plan.settings,
            **vars(config),
        }
        run = RunRecord("search", json.dumps(settings, default=str), _version())
        writer.add([run])
        for plat in plats:
            pools[plat.name] = EvaluatorPool(plat, workers, plan.eval_config, per_gpu=per_gpu)
            pools[plat.name].wait_ready()
        evaluate = {name: pool.evaluate_many for name, pool in pools.items()}
        if resumed is not None:
            evaluate = {n: replaying(e, n, resumed) for n, e in evaluate.items()}
        progress = Progress(console)

        def on_step(lineage: Any, step: Any) -> None:
            writer.add(_records(lineage, step, run.id, resumed.replayed if resumed else set()))
            progress.step(lineage, step, {lin.lineage_id for lin in search.alive})

        search = Search(
            probs,
            plats,
            list(plan.agents) or [BuiltinAgent()],
            evaluate,
            config,
            budget,
            on_step=on_step,
            seeds=plan.seeds,
            references=plan.references,
            make_lineage=RemoteLineage if plan.settings.get("lineage_actors") else Lineage,
        )
        try:
            with progress, _terminate_as_interrupt():
                result = search.run()
            stop = result.stop
        except KeyboardInterrupt:
            status = "interrupted"
            stop = "interrupted (Ctrl-C or SIGTERM): what was evaluated is recorded; --resume "
            stop += "continues"
        writer.flush()
        ray.get(writer.actor.finish_run.remote(run.id, status))
        console.print(_summary(search))
        if search.gave_up:
            console.print(
                f"gave up (no verified kernel in {config.functional_passes} functional passes): "
                + ", ".join(search.gave_up),
                highlight=False,
            )
        if status == "finished":
            _remeasure(search, pools, writer, run.id)
        if resumed is not None:
            console.print(
                f"resumed run {resumed.run_id}: {len(resumed.replayed)} evaluations replayed "
                "from the database, not run again",
                highlight=False,
            )
        console.print(f"run {run.id}: {stop}; database {db}", highlight=False)
    finally:
        for pool in pools.values():
            pool.shutdown()
        if writer is not None:  # let the file go: the writer actor holds it open
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(writer.actor.close.remote())
            ray.kill(writer.actor)
        if owns_ray:
            ray.shutdown()
    if status == "interrupted":
        raise typer.Exit(130)  # the shell's code for Ctrl-C: scripts can tell it apart


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (`ray job stop`, a scheduler, `kill`) stops the search like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _remeasure(search: Any, pools: dict[str, Any], writer: Any, of_run: str) -> None:
    """Every (problem, platform)'s winner evaluated again in a fresh process (and at the
    unseen sizes), recorded under a run of its own; both figures printed."""
    import ray

    from kforge_search.search.winners import remeasure
    from kforge_search.store.records import RunRecord

    run = RunRecord("remeasure", json.dumps({"of_run": of_run}), _version())
    writer.add([run])
    winners = remeasure(search.lineages, {n: p.evaluate_many for n, p in pools.items()})
    table = Table("problem", "platform", "search ms", "again ms", "search x", "again x", "again")
    for w in winners:
        again = w.measured_again
        writer.add(_evaluation_rows(w.problem, w.member, w.draft, w.again, "optimization", run.id))
        table.add_row(
            w.problem.name,
            w.platform,
            _fmt(w.member.p50_ms, "{:.4f}"),
            _fmt(again.p50_ms, "{:.4f}"),
            _fmt(w.member.speedup, "{:.2f}x"),
            _fmt(again.speedup, "{:.2f}x"),
            "confirmed" if w.confirmed else f"NOT confirmed: {w.again.status.value}",
        )
    writer.flush()
    ray.get(writer.actor.finish_run.remote(run.id, "finished"))
    if winners:
        console.print("winners, measured again (fresh process, unseen sizes):")
        console.print(table)


def _evaluation_rows(
    problem: Any, member: Any, draft: Any, result: Any, pass_kind: str, run_id: str
) -> list[Any]:
    """The store rows of one evaluation of a lineage member (a search step's, or a winner's
    second measurement)."""
    from kforge_search.store.from_eval import Origin, eval_records

    origin = Origin(
        parent_ids=member.parent_ids,
        lineage_id=member.lineage_id,
        generation=member.generation,
        pass_kind=pass_kind,
        agent=draft.agent,
        model=draft.model,
    )
    precision = draft.precision or "fp32"
    return eval_records(
        result, draft.source, problem, origin=origin, run_id=run_id, precision=precision
    )


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def _version() -> str:
    import kforge_search

    return kforge_search.__version__
