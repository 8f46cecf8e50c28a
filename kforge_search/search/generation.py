"""One generation of a search: every live lineage proposes, all the drafts are evaluated
together (a pool of evaluator actors runs them in parallel), and each lineage records its
results. No Ray here: `evaluate_many` is the pool's (`EvaluatorPool.evaluate_many`) in a
search, or `sequential(evaluator, platform)` in a single process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kforge_search.agents.base import Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.lineage import Lineage, Step


@dataclass(frozen=True)
class Request:
    key: str  # unique within a generation: "<lineage id>/<draft index>"
    source: str
    problem: Problem


EvaluateMany = Callable[[Sequence[Request]], Iterable[tuple[str, EvalResult]]]


def sequential(evaluator: object, platform: Platform) -> EvaluateMany:
    """Evaluate requests one after another in this process with an `Evaluator`."""

    def evaluate_many(requests: Sequence[Request]) -> Iterator[tuple[str, EvalResult]]:
        for r in requests:
            yield r.key, evaluator.evaluate_source(r.source, r.problem, platform)  # type: ignore[attr-defined]

    return evaluate_many


def run_generation(
    lineages: Sequence[Lineage],
    evaluate_many: EvaluateMany,
    budget: int,
    references: Mapping[str, Sequence[Reference]] | None = None,
) -> list[Step]:
    """Each lineage proposes up to `budget` drafts; all are evaluated; one step each."""
    ids = [lin.lineage_id for lin in lineages]
    if len(set(ids)) != len(ids):
        raise ValueError(f"lineage ids must be unique in a generation: {ids}")
    refs = references or {}
    proposals = {
        lin.lineage_id: lin.propose(budget, refs.get(lin.lineage_id, ())) for lin in lineages
    }
    requests = [
        Request(f"{lin.lineage_id}/{i}", draft.source, lin.problem)
        for lin in lineages
        for i, draft in enumerate(proposals[lin.lineage_id].drafts)
    ]
    results = dict(evaluate_many(requests))
    missing = [r.key for r in requests if r.key not in results]
    if missing:
        raise RuntimeError(f"no result for {missing}: the evaluator lost them")
    steps = []
    for lin in lineages:
        proposal = proposals[lin.lineage_id]
        got = [results[f"{lin.lineage_id}/{i}"] for i in range(len(proposal.drafts))]
        steps.append(proposal.counted(lin.record(proposal.drafts, got)))
    return steps
