"""`kforge bench SUITE --platform P --search-efficiency`: evolutionary selection vs random
sampling of the genome at the same evaluation budget (search/efficiency.py), per problem and
overall. Called by cli/bench.py."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from kforge_search.cli.output import Column, emit, note

console = Console()


def run_efficiency(problems: list[Any], plat: Any, policy: str, budget: int, trials: int,
                   out: str, fmt: str = "table") -> None:  # fmt: skip
    """Both strategies per problem; the table (cli/output.py, `fmt`), efficiency.json; progress
    to stderr under json and csv."""
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.agents.builtin.agent import genome_in_source, relevant_genes, seed_genome
    from kforge_search.agents.builtin.ir import Unsupported
    from kforge_search.agents.builtin.screen import GenomeOracle, time_reference
    from kforge_search.cli.common import fail
    from kforge_search.search.efficiency import REACH, compare

    if not plat.timing_meaningful:
        fail(f"{plat.name} times are not meaningful: nothing to compare", "use a timed platform")
    log = console if fmt == "table" else Console(stderr=True)
    agent = BuiltinAgent()
    report: list[dict[str, Any]] = []
    for problem in problems:
        plan = agent.plan(problem)
        if isinstance(plan, Unsupported):
            log.print(f"  {problem.name}: {plan.message}", highlight=False)
            continue
        start = seed_genome(plan, plat, policy)
        oracle = GenomeOracle(agent, problem, plat)
        base = time_reference(problem, plat)
        result = compare(
            agent, problem, plat, policy, start, relevant_genes(plan, start),
            lambda source: genome_in_source(source, plat), oracle, base, budget, trials,
        )  # fmt: skip
        evo, rnd = result.reached("evolutionary"), result.reached("random")
        row = {
            "problem": problem.name,
            "best_known_speedup": result.best_known,
            "evolutionary": evo,
            "random": rnd,
            "evolutionary_median": result.median_evaluations("evolutionary"),
            "random_median": result.median_evaluations("random"),
            "genomes_timed": len(oracle.times),
            "reference_ms": base,
        }
        report.append(row)
        log.print(f"  {problem.name}: evolutionary {evo}, random {rnd}", highlight=False)
    counts = functools.partial(Column, show=lambda c: _counts(c, budget))
    columns = (
        Column("problem"),
        Column("best_known_speedup", "best known", lambda v: f"{v:.2f}x"),
        counts("evolutionary", f"evolutionary: evals to {REACH:.0%}"),
        counts("random", f"random: evals to {REACH:.0%}"),
        Column("genomes_timed", "genomes timed"),
    )
    emit(columns, [[r[c.key] for c in columns] for r in report], fmt)
    medians = {
        s: [r[f"{s}_median"] for r in report if r[f"{s}_median"] is not None]
        for s in ("evolutionary", "random")
    }
    overall = {s: (sum(v) / len(v) if v else None) for s, v in medians.items()}
    note(
        f"overall (mean over problems of the median over {trials} trials; budget {budget}, a "
        f"trial that never reached {REACH:.0%} counts {budget + 1}): evolutionary "
        f"{_num(overall['evolutionary'])}, random {_num(overall['random'])} evaluations",
        fmt,
    )
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "platform": plat.name,
        "policy": policy,
        "budget": budget,
        "trials": trials,
        "reach": REACH,
        "oracle": "in-process screen timings (agents/builtin/screen.py)",
    }
    data = {"meta": meta, "problems": report, "overall": overall}
    (folder / "efficiency.json").write_text(json.dumps(data, indent=1))
    note(f"wrote {folder / 'efficiency.json'}", fmt)


def _counts(counts: list[int | None], budget: int) -> str:
    return ", ".join(str(c) if c is not None else f">{budget}" for c in counts)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
