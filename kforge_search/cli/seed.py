"""`kforge seed --from P --to Q PROBLEMS...`: start Q's lineages from P's best kernels.

Seeding new hardware or a new platform: for each problem, the best verified kernel the
database holds for platform P (on one device, with --from-device). Where P and Q write
kernels in the same language (e.g. cuda-triton measured on an H100, now searched on an
H200), that kernel is the first candidate of each of Q's lineages: evaluated on Q, then
built on. Otherwise (CUDA C++ to CPU C++, say) it cannot run on Q and is offered to Q's
lineages as a cross-platform reference instead. Registered in cli/app.py.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import typer

from kforge_search.cli.db import DEFAULT_DB, DbOpt
from kforge_search.cli.output import FormatOpt


def seed_cmd(
    problems: Annotated[list[str], typer.Argument(help="problem files, names or id prefixes")],
    source: Annotated[str, typer.Option("--from", help="platform whose best kernels seed")],
    target: Annotated[str, typer.Option("--to", help="platform to search")],
    from_device: Annotated[
        str | None, typer.Option(help="only kernels measured on this device (name contains)")
    ] = None,
    lineages: Annotated[int, typer.Option(help="lineages per problem")] = 2,
    generations: Annotated[int, typer.Option(help="generations at most")] = 3,
    policy: Annotated[str, typer.Option(help="numeric policy: strict or loose")] = "strict",
    workers: Annotated[int, typer.Option(help="evaluator actors")] = 1,
    db: DbOpt = DEFAULT_DB,
    sizes: Annotated[str | None, typer.Option(help="a named size set (e.g. ci)")] = None,
    address: Annotated[str | None, typer.Option(help="join this Ray cluster")] = None,
    fmt: FormatOpt = "table",
) -> None:
    """Search platform Q starting from platform P's best verified kernels in the database."""
    from kforge_search.agents.builtin.genome import describe
    from kforge_search.cli.common import fail, joins_cluster, load, platform_or_fail
    from kforge_search.cli.execute import Plan, execute
    from kforge_search.cli.output import check_format
    from kforge_search.evaluator import EvalConfig
    from kforge_search.platforms import get_platform
    from kforge_search.search.budget import Budget
    from kforge_search.search.engine import SearchConfig

    check_format(fmt)
    echo = functools.partial(typer.echo, err=fmt != "table")  # json/csv: stdout is the data
    try:  # the source platform need not run here: only its stored kernels are read
        src = get_platform(source)
    except ValueError as exc:
        fail(str(exc))
    dst = platform_or_fail(target, here=not joins_cluster(address))
    probs = [load(p, sizes, None) for p in problems]
    try:
        config = SearchConfig(lineages=lineages, generations=generations, policy=policy)
        most = len(probs) * max(lineages, config.max_alive) * generations
        budget = Budget(max_candidates=most * config.drafts_per_step)
        eval_config = EvalConfig(policy=policy)
    except ValueError as exc:
        fail(str(exc))
    found = _best_on(db, src.name, probs, from_device)
    missing = [p.name for p in probs if p.id not in found]
    if missing:
        fail(
            f"no verified {src.name} kernel in {db} for: {', '.join(missing)}",
            f"run `kforge search ... --platform {src.name}` first, or drop those problems",
        )
    same_language = src.language == dst.language
    if same_language:
        seeds, references = _seeds(found, dst), {}
    else:
        seeds, references = {}, _refs(found)
    how = "first candidates" if same_language else "cross-platform references"
    echo(f"seeding {dst.name} from {src.name}'s best kernels as {how}:")
    for p in probs:
        hit = found[p.id]
        echo(f"  {p.name}: {hit.candidate_id} ({_speed(hit)} on {hit.device_name})")
        genome = seeds[(p.id, dst.name)][0].genome if seeds else None
        if genome is not None:  # the builtin agent can tune it further
            echo(f"    builtin genome read back: {describe(genome)}")
    settings = {"sizes": sizes, "agent": "builtin", "seeded_from": src.name}
    plan = Plan(probs, [dst], config, budget, eval_config, settings, None, seeds, references)
    execute(plan, db=db, address=address, workers=workers, fmt=fmt)


def _best_on(db: str, platform: str, problems: list[Any], device: str | None) -> dict[str, Any]:
    """problem id -> the best verified kernel of that problem on the platform."""
    from kforge_search.cli.common import fail
    from kforge_search.store.queries import best_kernels
    from kforge_search.store.reader import Reader

    found: dict[str, Any] = {}
    try:
        with Reader.open(db) as reader:
            hits = best_kernels(reader, None, platform, limit=1000)  # best first
    except Exception as exc:  # a missing or unreadable file
        fail(f"cannot read {db}: {exc}", "pass the --db that holds the source platform's runs")
    wanted = {p.id for p in problems}
    for hit in hits:
        if hit.problem_id in wanted and (not device or device.lower() in hit.device_name.lower()):
            found.setdefault(hit.problem_id, hit)
    return found


def _seeds(found: dict[str, Any], platform: Any) -> dict[tuple[str, str], Any]:
    """Each kernel as a draft for `platform`; a builtin kernel keeps its genome (read from
    its docstring) so the builtin agent goes on tuning it."""
    from kforge_search.agents.base import Draft
    from kforge_search.agents.builtin.agent import genome_in_source

    seeds = {}
    for pid, hit in found.items():
        genome = genome_in_source(hit.source, platform)
        note = (
            f"best verified kernel on {hit.platform} ({hit.device_name}), "
            f"{_speed(hit)}: candidate {hit.candidate_id}"
        )
        precision = getattr(genome, "precision", "ieee" if genome is not None else "")
        draft = Draft(hit.source, platform.name, "seed", note, genome, precision)
        seeds[(pid, platform.name)] = [draft]
    return seeds


def _refs(found: dict[str, Any]) -> dict[str, Any]:
    from kforge_search.agents.base import Reference

    return {
        pid: [Reference(hit.source, hit.problem_name, hit.platform, _best(hit))]
        for pid, hit in found.items()
    }


def _best(hit: Any) -> float | None:
    speeds = [s for s in (hit.speedup_eager, hit.speedup_compile) if s]
    return min(speeds) if speeds else None


def _speed(hit: Any) -> str:
    best = _best(hit)
    return f"{best:.2f}x" if best else "unmeasured"
