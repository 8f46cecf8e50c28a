"""How the search hands drafts to evaluators without waiting for all of them.

`Evaluations` is the evaluator side of a search: `submit` queues one request, `poll` returns
the evaluations that finished, `capacity` says how many run at once (the search keeps a few
per evaluator in flight, so none sits idle). An `EvaluatorPool` meets it through
`actors.pool.PoolEvaluations`; a blocking `evaluate_many` (`generation.sequential`, an
oracle, a test's function) through `Batched`. No Ray here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kforge_search.evaluator.result import EvalResult
from kforge_search.problem import Problem


@dataclass(frozen=True)
class Request:
    key: str  # unique while pending: "<lineage id>/<step>/<draft index>"
    source: str
    problem: Problem
    # the unseen sizes are checked only for a draft timed faster than this: the best kept
    # draft of its problem so far (steps.Stepper; candidate_drive.CandidateDrive)
    unseen_below_ms: float | None = None


Evaluated = tuple[str, EvalResult]  # (request key, its result)
EvaluateMany = Callable[[Sequence[Request]], Iterable[Evaluated]]


@runtime_checkable
class Evaluations(Protocol):
    """Non-blocking evaluation: requests go in one at a time, results come out as they end."""

    @property
    def capacity(self) -> int:
        """Evaluations that run at the same time (the pool's actors)."""
        ...

    def submit(self, request: Request) -> None:
        """Queue one request; its key must not be pending already."""
        ...

    def poll(self, timeout: float | None = None) -> list[Evaluated]:
        """Wait up to `timeout` seconds (None: until one ends) and return every evaluation
        that ended; [] on timeout or when nothing is pending."""
        ...


class Batched:
    """`Evaluations` over a blocking `evaluate_many`: the requests submitted since the last
    batch go to it together at the next poll, and its results come back one per poll, so a
    lazy `evaluate_many` (`sequential`) evaluates one request per poll and the search takes
    each result in (and proposes again) before the next is evaluated. `timeout` is not
    honoured: a poll evaluates."""

    def __init__(self, evaluate_many: EvaluateMany, capacity: int = 1):
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: needs >= 1")
        self.evaluate_many, self._capacity = evaluate_many, capacity
        self._queued: list[Request] = []
        self._batch: Iterator[Evaluated] | None = None
        self._owed: set[str] = set()  # keys of the batch without a result yet

    @property
    def capacity(self) -> int:
        return self._capacity

    def submit(self, request: Request) -> None:
        self._queued.append(request)

    def poll(self, timeout: float | None = None) -> list[Evaluated]:
        while True:
            if self._batch is None:
                if not self._queued:
                    return []
                batch, self._queued = self._queued, []
                self._owed = {r.key for r in batch}
                self._batch = iter(self.evaluate_many(batch))
            for key, result in self._batch:
                if key in self._owed:
                    self._owed.discard(key)
                    return [(key, result)]
            self._batch = None
            if self._owed:
                raise RuntimeError(f"no result for {sorted(self._owed)}: the evaluator lost them")


def as_evaluations(evaluate: EvaluateMany | Evaluations) -> Evaluations:
    """`evaluate` itself when it is `Evaluations`, else a `Batched` over it."""
    if isinstance(evaluate, Evaluations):
        return evaluate
    return Batched(evaluate)
