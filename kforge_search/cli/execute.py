"""Runs one search plan (`kforge search`, `--resume` and `kforge seed` all end here):
lineages of the agents over Ray evaluator pools, every evaluation recorded by the single
database writer, the winners measured again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import typer
from rich.console import Console

from kforge_search.cli.live import Progress
from kforge_search.cli.output import Column, emit

console = Console(soft_wrap=True)  # lines whole in a pipe or a log, not wrapped at 80


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
    for call in step.llm_calls:  # every LLM call of the step, ok or failed
        rows.append(_call_row(call, run_id, lineage.lineage_id, platform))
    for draft in step.calls:  # an analysis made for a draft (also one that wrote a repeat)
        analysis = draft.analysis
        if analysis is None or not draft.parents or draft.parents[0] not in sources:
            continue
        analyzed = candidate_id(sources[draft.parents[0]], platform)
        rows.append(_recommendation(analysis, analyzed))
    return rows


def _call_row(call: Any, run_id: str, lineage_id: str, platform: str) -> Any:
    """An llm_calls row from an LLMCall (llm/calls.py)."""
    from kforge_search.store.ids import candidate_id
    from kforge_search.store.records import LlmCallRecord

    return LlmCallRecord(
        role=call.role,
        model=call.model,
        status=call.status,
        tokens_in=call.tokens_in,
        tokens_out=call.tokens_out,
        cost_usd=call.cost_usd,
        latency_s=call.latency_s,
        cached=call.cached,
        run_id=run_id,
        candidate_id=candidate_id(call.subject, platform) if call.subject else "",
        lineage_id=lineage_id,
        attempts=call.attempts,
        http_status=call.http_status,
        error=call.error,
    )


@functools.cache
def _rules_analyst() -> Any:
    """One rules-only analyst per process (it caches each problem's work)."""
    from kforge_search.agents.llm.analyst import Analyst

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


def _summary(search: Any) -> list[tuple[Any, ...]]:
    """Per (problem, platform): lineages alive and in all, candidates evaluated and verified,
    the best speedup (SUMMARY's columns)."""
    rows = []
    groups: dict[tuple[str, str], list[Any]] = {}
    for lineage in search.lineages:
        groups.setdefault((lineage.problem.name, lineage.platform.name), []).append(lineage)
    for (problem, platform), lineages in sorted(groups.items()):
        unique = {m.candidate_id: m for lin in lineages for m in lin.members}
        members = list(unique.values())
        good = [m for m in members if m.verified]
        best = max((m.speedup or 0.0 for m in good), default=0.0) or None
        alive = sum(1 for lin in lineages if lin in search.alive)
        rows.append((problem, platform, alive, len(lineages), len(members), len(good), best))
    return rows


SUMMARY = ("problem", "platform", "alive", "lineages", "evaluated", "verified",
           Column("best_speedup", "best speedup", lambda v: _fmt(v, "{:.2f}x")))  # fmt: skip


def _not_runnable(pools: dict[str, Any], problems: list[Any]) -> list[tuple[str, str, str]]:
    """(problem, platform, why) for each problem whose reference cannot run on a platform
    (it raised or exceeded a limit): checked on the pools' actors before the search."""
    from kforge_search.search.suite_bench import short_reason

    found = []
    for name, pool in pools.items():
        failed = pool.check_references(problems)
        found += [(p.name, name, short_reason(failed[p.id])) for p in problems if p.id in failed]
    return found


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


@dataclass
class _Calls:
    """The LLM calls of a search so far: a search whose every call failed fails."""

    made: int = 0
    ok: int = 0
    last_failure: str = ""

    def add(self, calls: Any) -> None:
        for call in calls:
            self.made += 1
            self.ok += call.ok
            if not call.ok:
                self.last_failure = f"{call.role} call {call.summary}"

    @property
    def all_failed(self) -> str:
        """Why the search failed when it made LLM calls and none succeeded ("" otherwise)."""
        if not self.made or self.ok:
            return ""
        return f"every LLM call of the search failed ({self.made}); the last: {self.last_failure}"


def _check_db(db: Any) -> None:
    """Before anything starts: the database can be written (store.connection)."""
    from kforge_search.cli.common import fail
    from kforge_search.store.connection import StoreError, check_writable
    from kforge_search.store.schema import SchemaError

    try:
        check_writable(db)
    except (StoreError, SchemaError) as exc:
        fail(str(exc))


def _run_record(kind: str, config: str) -> Any:
    """A run row that says where its driver runs (store/runs.py tells a dead one)."""
    from kforge_search.store.ids import utcnow
    from kforge_search.store.records import RunRecord
    from kforge_search.store.runs import this_host

    now = utcnow()
    return RunRecord(kind, config, _version(), started_at=now, host=this_host(),
                     pid=os.getpid(), heartbeat_at=now)  # fmt: skip


def execute(
    plan: Plan, *, db: str, address: str | None, workers: int | None = None,
    per_gpu: int | None = None,
    fmt: str = "table",
) -> None:  # fmt: skip
    """Run the plan; `fmt` (cli/output.py): the summary as a table, or as json or csv on
    stdout with everything else on stderr."""
    _check_db(db)  # before Ray: a bad --db starts nothing and changes nothing
    out = console if fmt == "table" else Console(stderr=True, soft_wrap=True)
    import ray

    from kforge_search.actors.lineage import RemoteLineage
    from kforge_search.actors.pool import EvaluatorPool
    from kforge_search.actors.resources import (
        CPUS_PER_ACTOR,
        ResourceError,
        host_sharers,
        plan_pools,
    )
    from kforge_search.actors.writer import (
        BatchedWriter,
        Heartbeat,
        WriterUnavailable,
        start_writer,
    )
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.cli.common import fail
    from kforge_search.search.engine import Search
    from kforge_search.search.lineage import Lineage
    from kforge_search.search.resume import Replaying

    probs, plats, config, budget = plan.problems, plan.platforms, plan.config, plan.budget
    resumed = plan.resumed
    owns_ray = not ray.is_initialized()  # a caller's cluster (tests, a notebook) is kept

    session = contextlib.ExitStack()  # what the cluster we start starts ends with this command,
    if owns_ray:  # however it ends (procs/watch.py): killed, Ray's agents would stay alive
        from kforge_search.procs.watch import watched

        session.enter_context(watched())
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except BaseException:
            session.close()
            raise
    pools: dict[str, Any] = {}
    writer = None
    status, failure = "finished", ""
    beats = contextlib.ExitStack()
    try:
        try:
            writer = BatchedWriter(start_writer(db), batch_size=50)
        except WriterUnavailable as exc:
            held = "in use by" in str(exc)
            fail(str(exc), "close the process that holds it, or pass another --db" if held else "")
        settled = ray.get(writer.actor.settle_runs.remote())
        if settled:
            out.print(
                f"marked interrupted (their driver had died): {', '.join(settled)}; "
                "--resume RUN continues one",
                highlight=False,
            )
        settings: dict[str, Any] = {
            "problems": [p.name for p in probs],
            "platforms": [p.name for p in plats],
            **plan.settings,
            **vars(config),
        }
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        try:  # one timing lane per GPU, shared by the GPU platforms' actors (resources.py)
            sized = plan_pools(plats, nodes, workers, per_gpu)
            sharers = host_sharers(plats, sized, nodes)
            for plat in plats:
                size, sharing = sized[plat.name].actors, sized[plat.name].per_gpu
                # oracles (reference children kept per problem) by the actors sharing a device;
                # a baseline child compiles with its actor's cores, not every core of the node
                threads = CPUS_PER_ACTOR if sharing > 1 else 0
                evaluation = replace(
                    plan.eval_config,
                    max_oracles=max(2, 16 // sharing),
                    compile_threads=threads,
                    host_sharers=sharers,
                )
                pools[plat.name] = EvaluatorPool(plat, size, evaluation, per_gpu=sharing)
                pools[plat.name].wait_ready()
                if wrong := pools[plat.name].unavailable():  # on the nodes, not the driver's
                    lane, why = next(iter(wrong.items()))
                    fail(f"platform {plat.name} cannot run on the cluster's node {lane}: {why}",
                         "see `kforge platforms` on that node")  # fmt: skip
                settings.setdefault("evaluators", {})[plat.name] = {
                    "actors": size, "per_gpu": sharing, "lanes": pools[plat.name].lanes()
                }  # fmt: skip
        except ResourceError as exc:
            hint = "--workers and --per-gpu size the pools; `ray status` shows the cluster"
            fail(str(exc), hint)
        # a problem whose reference cannot run on any platform is left out, with the reason
        not_runnable = _not_runnable(pools, probs)
        if not_runnable:
            settings["not_searched"] = [
                {"problem": p, "platform": plat, "reason": why} for p, plat, why in not_runnable
            ]
            emit(("problem", "platform", "reason"), not_runnable, file=out.file,
                 title="not searched: the reference cannot run")  # fmt: skip
        dropped = {p for p, _, _ in not_runnable}
        dropped = {p for p in dropped if sum(r[0] == p for r in not_runnable) == len(plats)}
        probs = [p for p in probs if p.name not in dropped]
        run = _run_record("search", json.dumps(settings, default=str))
        writer.add([run])
        writer.flush()  # the run is in the file before its first evaluation
        heart = beats.enter_context(Heartbeat(writer.actor))
        heart.runs.append(run.id)
        if not probs:  # the run is recorded, with the reasons, and failed
            ray.get(writer.actor.finish_run.remote(run.id, "failed"))
            fail(f"run {run.id}: no problem could be searched, no reference runs", code=1)
        evaluate = {name: pool.evaluations() for name, pool in pools.items()}
        if resumed is not None:
            evaluate = {n: Replaying(e, n, resumed) for n, e in evaluate.items()}
        progress = Progress(out)
        calls = _Calls()

        def on_step(lineage: Any, step: Any) -> None:
            writer.add(_records(lineage, step, run.id, resumed.replayed if resumed else set()))
            writer.flush()  # in the file before it is printed: a kill loses no printed result
            calls.add(step.llm_calls)
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
        except Exception:  # a crash: what was evaluated is kept, the run says it failed
            with contextlib.suppress(Exception):
                writer.flush()
                ray.get(writer.actor.finish_run.remote(run.id, "failed"))
            raise
        if failure := calls.all_failed:
            status = "failed"
        writer.flush()
        ray.get(writer.actor.finish_run.remote(run.id, status))
        if fmt == "table":
            emit(SUMMARY, _summary(search))
        if search.gave_up:
            out.print(
                f"gave up (no verified kernel in {config.functional_passes} functional passes): "
                + ", ".join(search.gave_up),
                highlight=False,
            )
        for lineage_id, error in search.agent_errors:
            out.print(f"{lineage_id}: retired, its agent raised {error}", highlight=False)
        winners = _remeasure(search, pools, writer, run.id, heart) if status == "finished" else []
        if winners and fmt == "table":
            emit(WINNERS, winners, title="winners, measured again (fresh process, unseen sizes):")
        elif fmt != "table":
            emit(_machine_columns(), _machine_rows(search, winners, not_runnable), fmt)
        if resumed is not None:
            out.print(
                f"resumed run {resumed.run_id}: {len(resumed.replayed)} evaluations replayed "
                "from the database, not run again",
                highlight=False,
            )
        out.print(f"run {run.id}: {failure or stop}; database {db}", highlight=False, markup=False)
    finally:
        beats.close()
        for pool in pools.values():
            pool.shutdown()
        if writer is not None:  # let the file go: the writer actor holds it open
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(writer.actor.close.remote())
            ray.kill(writer.actor)
        if owns_ray:
            ray.shutdown()
        session.close()
    if status == "interrupted":
        raise typer.Exit(130)  # the shell's code for Ctrl-C: scripts can tell it apart
    if failure:
        from rich.markup import escape  # a provider's error text may hold brackets

        fail(escape(failure), "`kforge db show RUN` lists the calls of each lineage", code=1)


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


def _remeasure(
    search: Any, pools: dict[str, Any], writer: Any, of_run: str, heart: Any
) -> list[tuple[Any, ...]]:
    """Every (problem, platform)'s winner evaluated again in a fresh process (and at the
    unseen sizes), recorded under a run of its own; both figures, as WINNERS' rows."""
    import ray

    from kforge_search.search.winners import remeasure

    run = _run_record("remeasure", json.dumps({"of_run": of_run}))
    writer.add([run])
    writer.flush()
    heart.runs.append(run.id)
    winners = remeasure(search.lineages, {n: p.evaluate_many for n, p in pools.items()})
    rows = []
    for w in winners:
        again = w.measured_again
        writer.add(_evaluation_rows(w.problem, w.member, w.draft, w.again, "optimization", run.id))
        verdict = "confirmed" if w.confirmed else f"NOT confirmed: {w.again.status.value}"
        rows.append((w.problem.name, w.platform, w.member.p50_ms, again.p50_ms, w.member.speedup,
                     again.speedup, verdict))  # fmt: skip
    writer.flush()
    ray.get(writer.actor.finish_run.remote(run.id, "finished"))
    return rows


_ms = functools.partial(Column, show=lambda v: _fmt(v, "{:.4f}"))
_x = functools.partial(Column, show=lambda v: _fmt(v, "{:.2f}x"))
WINNERS = ("problem", "platform", _ms("search_ms", "search ms"), _ms("again_ms", "again ms"),
           _x("search_speedup", "search x"), _x("again_speedup", "again x"), "again")  # fmt: skip


def _machine_columns() -> tuple[Any, ...]:
    """--format json/csv: one row per (problem, platform), what the tables say together."""
    return (*SUMMARY, *WINNERS[2:], "agent_errors", "not_searched")


def _machine_rows(
    search: Any, winners: list[tuple[Any, ...]], not_runnable: list[tuple[str, str, str]]
) -> list[tuple[Any, ...]]:
    again = {(w[0], w[1]): w[2:] for w in winners}
    errors: dict[tuple[str, str], list[str]] = {}
    where = {lin.lineage_id: (lin.problem.name, lin.platform.name) for lin in search.lineages}
    for lineage_id, error in search.agent_errors:
        errors.setdefault(where[lineage_id], []).append(error)
    rows = [
        (*row, *again.get((row[0], row[1]), (None,) * 5), errors.get((row[0], row[1]), []), None)
        for row in _summary(search)
    ]
    searched = {(r[0], r[1]) for r in rows}
    blank = (None,) * (len(SUMMARY) - 2 + 5)
    rows += [(p, plat, *blank, [], why) for p, plat, why in not_runnable
             if (p, plat) not in searched]  # fmt: skip
    return rows


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
