"""`kforge search PROBLEMS... --platform P`: lineages of the builtin agent over Ray evaluator
pools, every evaluation recorded by the single database writer. Registered in cli/app.py.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kforge_search.cli.db import DEFAULT_DB, DbOpt

console = Console()


def _records(lineage: Any, step: Any, run_id: str) -> list[Any]:
    """The store rows of one lineage step: problem, hardware, candidate, evaluation, ..."""
    from kforge_search.store.from_eval import Origin, eval_records

    rows: list[Any] = []
    reused = step.reused or (False,) * len(step.members)
    for member, draft, result, again in zip(
        step.members, step.drafts, step.results, reused, strict=True
    ):
        if again:  # another lineage's evaluation of the same kernel: recorded with it
            continue
        origin = Origin(
            parent_ids=member.parent_ids,
            lineage_id=member.lineage_id,
            generation=member.generation,
            pass_kind=step.pass_kind,
            agent=draft.agent,
        )
        rows.extend(
            eval_records(
                result,
                draft.source,
                lineage.problem,
                origin=origin,
                run_id=run_id,
                precision=draft.precision or "fp32",
            )
        )
    return rows


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
    problems: Annotated[list[str], typer.Argument(help="problem files, names or id prefixes")],
    platform: Annotated[
        list[str], typer.Option("--platform", help="platform(s) to search; repeat for several")
    ],
    lineages: Annotated[int, typer.Option(help="lineages per problem and platform")] = 2,
    generations: Annotated[int, typer.Option(help="generations at most")] = 3,
    max_candidates: Annotated[
        int | None, typer.Option(help="stop after this many evaluations")
    ] = None,
    agent: Annotated[str, typer.Option(help="builtin (LLM agents: not yet)")] = "builtin",
    policy: Annotated[str, typer.Option(help="numeric policy: strict or loose")] = "strict",
    workers: Annotated[int, typer.Option(help="evaluator actors per platform")] = 1,
    db: DbOpt = DEFAULT_DB,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="a named size set of the problems (e.g. ci)")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="join this Ray cluster (default: RAY_ADDRESS, else a local one)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the search")] = 0,
) -> None:
    """Search for fast kernels: lineages, generations, evolutionary selection, recorded."""
    import ray

    from kforge_search.actors.pool import EvaluatorPool
    from kforge_search.actors.writer import BatchedWriter, WriterUnavailable, start_writer
    from kforge_search.agents import BuiltinAgent
    from kforge_search.cli.app import fail, load, platform_or_fail
    from kforge_search.evaluator import EvalConfig
    from kforge_search.search.budget import Budget
    from kforge_search.search.engine import Search, SearchConfig
    from kforge_search.store.records import RunRecord

    if agent != "builtin":
        fail(f"--agent {agent}: only the builtin agent exists so far", "use --agent builtin")
    try:
        config = SearchConfig(lineages=lineages, generations=generations, policy=policy, seed=seed)
        # no --max-candidates: the most the generations can evaluate (every lineage alive)
        most = len(problems) * len(platform) * max(lineages, config.max_alive) * generations
        budget = Budget(max_candidates=max_candidates or most * config.drafts_per_step)
        eval_config = EvalConfig(policy=policy)
    except ValueError as exc:
        fail(str(exc))
    plats = [platform_or_fail(name) for name in platform]
    probs = [load(p, sizes, None) for p in problems]
    owns_ray = not ray.is_initialized()  # a caller's cluster (tests, a notebook) is kept
    if owns_ray:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    pools: dict[str, Any] = {}
    writer = None
    started = time.monotonic()
    try:
        try:
            writer = BatchedWriter(start_writer(db), batch_size=50)
        except WriterUnavailable as exc:
            fail(str(exc), "close the process that holds the database, or pass another --db")
        settings = {"problems": [p.name for p in probs], "platforms": platform, **vars(config)}
        run = RunRecord("search", json.dumps(settings, default=str), _version())
        writer.add([run])
        for plat in plats:
            pools[plat.name] = EvaluatorPool(plat, workers, eval_config)
            pools[plat.name].wait_ready()
        evaluated = [0]

        def on_step(lineage: Any, step: Any) -> None:
            writer.add(_records(lineage, step, run.id))
            evaluated[0] += len(step.members)
            rate = evaluated[0] / max(1e-9, (time.monotonic() - started) / 60)
            best = lineage.best()
            console.print(
                f"gen {step.generation} {lineage.lineage_id} ({step.pass_kind}): "
                + ", ".join(
                    m.status.value + (" (known)" if again else "")
                    for m, again in zip(step.members, step.reused, strict=True)
                )
                + (f"; best {best.speedup:.2f}x" if best and best.speedup else "")
                + f"  ({evaluated[0]} evaluated, {rate:.1f}/min)",
                highlight=False,
            )

        search = Search(
            probs,
            plats,
            BuiltinAgent(),
            {name: pool.evaluate_many for name, pool in pools.items()},
            config,
            budget,
            on_step=on_step,
        )
        status = "finished"
        try:
            result = search.run()
            stop = result.stop
        except KeyboardInterrupt:
            status, stop = "interrupted", "interrupted (Ctrl-C): what was evaluated is recorded"
        writer.flush()
        ray.get(writer.actor.finish_run.remote(run.id, status))
        console.print(_summary(search))
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


def _version() -> str:
    import kforge_search

    return kforge_search.__version__
