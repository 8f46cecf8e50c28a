"""Search efficiency: does evolutionary selection find fast kernels with fewer evaluations
than random sampling of the genome?

Both strategies get the same number of evaluations of the same problem and the same
*oracle*: a function from a genome to its time (or None when it fails). The evolutionary
strategy is the search itself (`Search`: lineages of the builtin agent, fork and retire);
random sampling draws admissible genomes uniformly from the genome space. The figure per
strategy is the number of evaluations after which its best speedup first reaches 95% of the
best speedup known for the problem (the best either strategy found in any trial).

The oracle of `kforge bench --search-efficiency` times genomes in-process with the
evaluator's timing methods (agents/builtin/screen.py): both strategies see identical measurements,
and a genome timed once is not timed again. Its results are rankings, not reported kernels.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kforge_search.agents.base import Agent
from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.genome import Genome
from kforge_search.evaluator.result import Baseline, EvalResult, Status, TimingStats
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.budget import Budget
from kforge_search.search.engine import Search, SearchConfig
from kforge_search.search.generation import Request

Oracle = Callable[[Genome], float | None]  # a genome -> its p50 ms, None when it fails
GenomeOf = Callable[[str], Genome | None]  # a draft's source -> its genome
REACH = 0.95


@dataclass(frozen=True)
class Trace:
    strategy: str  # "evolutionary" or "random"
    trial: int
    best: tuple[float, ...]  # best speedup so far after each evaluation (0.0: none yet)

    def evaluations_to(self, target: float) -> int | None:
        """The first evaluation count whose best reaches `target`; None if never."""
        return next((i + 1 for i, b in enumerate(self.best) if b >= target), None)


@dataclass(frozen=True)
class Efficiency:
    problem: str
    budget: int
    best_known: float  # speedup
    traces: tuple[Trace, ...]

    def reached(self, strategy: str) -> list[int | None]:
        target = REACH * self.best_known
        return [t.evaluations_to(target) for t in self.traces if t.strategy == strategy]

    def median_evaluations(self, strategy: str) -> float | None:
        """Median over trials; a trial that never reached counts as budget + 1."""
        counts = [n if n is not None else self.budget + 1 for n in self.reached(strategy)]
        return statistics.median(counts) if counts else None


def _best_so_far(speedups: Sequence[float]) -> tuple[float, ...]:
    out, best = [], 0.0
    for s in speedups:
        best = max(best, s)
        out.append(best)
    return tuple(out)


def random_trace(
    start: Genome, policy: str, among: frozenset[str], oracle: Oracle, base_ms: float,
    budget: int, trial: int,
) -> Trace:  # fmt: skip
    """`budget` distinct genomes drawn uniformly over the relevant genes (repaired)."""
    rng = random.Random(f"random:{trial}")
    space = {k: v for k, v in gen.space(start, policy).items() if k in among}
    seen: set[Genome] = set()
    speedups: list[float] = []
    for _ in range(budget * 50):
        if len(speedups) >= budget:
            break
        picks = {name: rng.choice(values) for name, values in space.items()}
        genome = gen.repair(dataclasses.replace(start, **picks), policy)
        if genome in seen:
            continue
        seen.add(genome)
        ms = oracle(genome)
        speedups.append(base_ms / ms if ms else 0.0)
    return Trace("random", trial, _best_so_far(speedups))


def _result(problem: Problem, platform: Platform, policy: str, source: str,
            ms: float | None, base_ms: float) -> EvalResult:  # fmt: skip
    from kforge_search.store.ids import candidate_id

    timing = TimingStats("oracle", 1, ms, ms, ms) if ms else None
    base = Baseline("eager", True, TimingStats("oracle", 1, base_ms, base_ms, base_ms))
    return EvalResult(
        status=Status.OK if ms else Status.RUNTIME_ERROR,
        message="timed by the efficiency oracle" if ms else "failed in the efficiency oracle",
        stage="done" if ms else "time",
        problem_id=problem.id,
        problem_name=problem.name,
        platform=platform.name,
        policy=policy,
        candidate_hash=candidate_id(source, platform.name),
        timing=timing,
        baselines=(base,),
        generalizes="yes" if ms else "unchecked",
    )


def evolutionary_trace(
    agent: Agent, problem: Problem, platform: Platform, policy: str, genome_of: GenomeOf,
    oracle: Oracle, base_ms: float, budget: int, trial: int,
) -> Trace:  # fmt: skip
    """The search itself (2 lineages, fork and retire) until `budget` evaluations."""
    speedups: list[float] = []

    def evaluate_many(requests: Sequence[Request]):  # type: ignore[no-untyped-def]
        for r in requests:
            genome = genome_of(r.source)
            ms = oracle(genome) if genome is not None else None
            speedups.append(base_ms / ms if ms else 0.0)
            yield r.key, _result(problem, platform, policy, r.source, ms, base_ms)

    config = SearchConfig(lineages=2, generations=budget, policy=policy, seed=trial)
    Search(
        [problem], [platform], agent, {platform.name: evaluate_many}, config,
        Budget(max_candidates=budget),
    ).run()  # fmt: skip
    return Trace("evolutionary", trial, _best_so_far(speedups[:budget]))


def compare(
    agent: Agent, problem: Problem, platform: Platform, policy: str, start: Genome,
    among: frozenset[str], genome_of: GenomeOf, oracle: Oracle, base_ms: float,
    budget: int, trials: int = 3,
) -> Efficiency:  # fmt: skip
    traces = []
    for trial in range(trials):
        traces.append(
            evolutionary_trace(
                agent, problem, platform, policy, genome_of, oracle, base_ms, budget, trial
            )
        )
        traces.append(random_trace(start, policy, among, oracle, base_ms, budget, trial))
    best = max((t.best[-1] for t in traces if t.best), default=0.0)
    return Efficiency(problem.name, budget, best, tuple(traces))
