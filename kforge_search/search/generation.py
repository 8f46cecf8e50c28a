"""One step of each of some lineages (a "generation"), and in-process evaluation.

`run_generation` starts a step of every lineage and returns when all are recorded: the
engine no longer waits like this (search/engine.py grows lineages without a barrier, over
the same `Stepper`), but a caller that wants lineages to step together (tests, a one-off
comparison) can. `sequential(evaluator, platform)` is an `evaluate_many` that evaluates in
this process. No Ray here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from kforge_search.agents.base import Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.search.evaluations import (
    EvaluateMany,
    Evaluations,
    Request,
    as_evaluations,
)
from kforge_search.search.lineage import Lineage, Step
from kforge_search.search.steps import MAX_PROPOSING, Stepper, concurrent, result_key

__all__ = [
    "MAX_PROPOSING",
    "EvaluateMany",
    "Request",
    "result_key",
    "run_generation",
    "sequential",
]


def sequential(evaluator: object, platform: Platform) -> EvaluateMany:
    """Evaluate requests one after another in this process with an `Evaluator` (lazily: one
    per result taken)."""

    def evaluate_many(requests: Sequence[Request]) -> Iterator[tuple[str, EvalResult]]:
        for r in requests:
            yield (
                r.key,
                evaluator.evaluate_source(  # type: ignore[attr-defined]
                    r.source, r.problem, platform, unseen_below_ms=r.unseen_below_ms
                ),
            )

    return evaluate_many


def run_generation(
    lineages: Sequence[Lineage],
    evaluate_many: EvaluateMany | Evaluations,
    budget: int,
    references: Mapping[str, Sequence[Reference]] | None = None,
    known: dict[str, EvalResult] | None = None,
    *,
    remaining: Mapping[str, int] | None = None,
    on_step: Callable[[Lineage, Step], None] | None = None,
    concurrency: int = MAX_PROPOSING,
) -> list[Step]:
    """Each lineage proposes up to `budget` drafts; all are evaluated; one step each.

    Lineages that may propose side by side (LLM agents, lineage actors) do so in up to
    `concurrency` threads, the others one after another in this thread (holding
    agents.base.SERIAL). Drafts are submitted as their proposals arrive: a lineage whose
    model is slow delays no other lineage's evaluation. Each lineage's step is recorded,
    and given to `on_step`, as soon as its results are in; the steps are returned in the
    order of `lineages`. `remaining`: per lineage id, the evaluations the search has left
    for it (told to its agent).

    `known` maps `result_key(problem, source)` to results the search already has: a draft
    found there (another lineage wrote the same kernel) takes that result and is not
    evaluated again, and so is a second copy within this generation. New results are added.
    """
    ids = [lin.lineage_id for lin in lineages]
    if len(set(ids)) != len(ids):
        raise ValueError(f"lineage ids must be unique in a generation: {ids}")
    refs, left = references or {}, remaining or {}
    evaluations = as_evaluations(evaluate_many)
    steps: dict[str, Step] = {}

    def recorded(lin: Lineage, step: Step) -> None:
        steps[lin.lineage_id] = step
        if on_step is not None:
            on_step(lin, step)

    platforms = {lin.platform.name: evaluations for lin in lineages}
    with Stepper(platforms, known, recorded, concurrency) as stepper:
        # the lineages that propose in threads first: the others, here, while they wait
        for lin in sorted(lineages, key=lambda lin: not concurrent(lin)):
            stepper.start(lin, budget, refs.get(lin.lineage_id, ()), left.get(lin.lineage_id))
        while stepper.active:
            stepper.wait()
    return [steps[i] for i in ids]
