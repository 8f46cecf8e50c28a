"""`kforge bench SUITE --platform P --search-efficiency`: evolutionary selection vs random
sampling of the genome at the same evaluation budget (search/efficiency.py), per problem and
overall. Called by cli/bench.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


def run_efficiency(problems: list[Any], plat: Any, policy: str, budget: int, trials: int,
                   out: str) -> None:  # fmt: skip
    from kforge_search.agents.builtin import BuiltinAgent
    from kforge_search.agents.builtin.agent import genome_in_source, relevant_genes, seed_genome
    from kforge_search.agents.builtin.ir import Unsupported
    from kforge_search.agents.builtin.screen import GenomeOracle, time_reference
    from kforge_search.cli.common import fail
    from kforge_search.search.efficiency import REACH, compare

    if not plat.timing_meaningful:
        fail(f"{plat.name} times are not meaningful: nothing to compare", "use a timed platform")
    agent = BuiltinAgent()
    table = Table("problem", "best known", "evolutionary: evals to 95%", "random: evals to 95%",
                  "genomes timed")  # fmt: skip
    report: list[dict[str, Any]] = []
    for problem in problems:
        plan = agent.plan(problem)
        if isinstance(plan, Unsupported):
            console.print(f"  {problem.name}: {plan.message}", highlight=False)
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
        table.add_row(problem.name, f"{result.best_known:.2f}x", _counts(evo, budget),
                      _counts(rnd, budget), str(len(oracle.times)))  # fmt: skip
        console.print(f"  {problem.name}: evolutionary {evo}, random {rnd}", highlight=False)
    console.print(table)
    medians = {
        s: [r[f"{s}_median"] for r in report if r[f"{s}_median"] is not None]
        for s in ("evolutionary", "random")
    }
    overall = {s: (sum(v) / len(v) if v else None) for s, v in medians.items()}
    console.print(
        f"overall (mean over problems of the median over {trials} trials; budget {budget}, a "
        f"trial that never reached {REACH:.0%} counts {budget + 1}): evolutionary "
        f"{_num(overall['evolutionary'])}, random {_num(overall['random'])} evaluations",
        highlight=False,
    )
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"platform": plat.name, "policy": policy, "budget": budget, "trials": trials,
            "reach": REACH, "oracle": "in-process screen timings (agents/builtin/screen.py)"}  # fmt: skip
    data = {"meta": meta, "problems": report, "overall": overall}
    (folder / "efficiency.json").write_text(json.dumps(data, indent=1))
    console.print(f"wrote {folder / 'efficiency.json'}", highlight=False)


def _counts(counts: list[int | None], budget: int) -> str:
    return ", ".join(str(c) if c is not None else f">{budget}" for c in counts)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
