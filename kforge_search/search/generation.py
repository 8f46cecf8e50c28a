"""One generation of a search: every live lineage proposes, all the drafts are evaluated
together (a pool of evaluator actors runs them in parallel), and each lineage records its
results. No Ray here: `evaluate_many` is the pool's (`EvaluatorPool.evaluate_many`) in a
search, or `sequential(evaluator, platform)` in a single process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kforge_search.agents.base import Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.problem import Problem, source_hash
from kforge_search.search.lineage import Lineage, Proposal, Step


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
    known: dict[str, EvalResult] | None = None,
) -> list[Step]:
    """Each lineage proposes up to `budget` drafts; all are evaluated; one step each.

    `known` maps `result_key(problem, source)` to results the search already has: a draft
    found there (another lineage wrote the same kernel) takes that result and is not
    evaluated again, and so is a second copy within this generation. New results are added.
    """
    ids = [lin.lineage_id for lin in lineages]
    if len(set(ids)) != len(ids):
        raise ValueError(f"lineage ids must be unique in a generation: {ids}")
    refs = references or {}
    known = {} if known is None else known

    def propose(lin: Lineage) -> Proposal:
        return lin.propose(budget, refs.get(lin.lineage_id, ()))

    if any(getattr(lin, "remote", False) for lin in lineages):
        # lineages in their own actors (actors/lineage.py): their agents work at once
        with ThreadPoolExecutor(max_workers=len(lineages)) as pool:
            proposals = dict(zip(ids, pool.map(propose, lineages), strict=True))
    else:  # in this process: one after another (tracing is not thread-safe)
        proposals = {lin.lineage_id: propose(lin) for lin in lineages}
    requests: dict[str, Request] = {}  # result key -> the one request that evaluates it
    for lin in lineages:
        for i, draft in enumerate(proposals[lin.lineage_id].drafts):
            key = result_key(lin.problem, draft.source)
            if key not in known and key not in requests:
                requests[key] = Request(f"{lin.lineage_id}/{i}", draft.source, lin.problem)
    by_request = dict(evaluate_many(list(requests.values())))
    missing = [r.key for r in requests.values() if r.key not in by_request]
    if missing:
        raise RuntimeError(f"no result for {missing}: the evaluator lost them")
    fresh = {key: by_request[r.key] for key, r in requests.items()}
    known.update(fresh)
    steps = []
    for lin in lineages:
        proposal = proposals[lin.lineage_id]
        keys = [result_key(lin.problem, d.source) for d in proposal.drafts]
        step = lin.record(proposal.drafts, [known[k] for k in keys])
        reused = tuple(
            k not in fresh or requests[k].key != f"{lin.lineage_id}/{i}" for i, k in enumerate(keys)
        )
        steps.append(dataclasses.replace(proposal.counted(step), reused=reused))
    return steps


def result_key(problem: Problem, source: str) -> str:
    """Which evaluations are the same: the problem (at its sizes) and the normalized source."""
    return f"{problem.id}|{problem.sizes_key}|{source_hash(source)}"
