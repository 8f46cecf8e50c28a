"""Resuming a search from the database: the run is replayed, not re-evaluated.

A search is deterministic given its settings: each lineage's proposals follow from its seed,
its step and the results it has seen. A resumed run starts the same search again, and each
draft whose evaluation the earlier run(s) stored gets that stored result instead of a new
evaluation (`Replaying`), so the lineages arrive where the run stopped (after a Ctrl-C, a
crash or its last step) and go on from there with new evaluations.

Without a generation barrier, what a lineage proposes can depend on the order in which
results came in (the references offered, when a group is judged). `Replaying` answers
stored drafts at the next poll, in the order they were submitted, one result taken in at
a time: a run whose evaluations ended in the order they were submitted (one evaluator per
platform) is replayed step for step. With several evaluators the replay can take another
order, reach drafts the run never evaluated and evaluate them; every draft it shares with
the run is still answered from the store.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kforge_search.evaluator.result import EvalResult
from kforge_search.search.evaluations import Evaluated, EvaluateMany, Evaluations, Request


class ResumeError(ValueError):
    """The run cannot be resumed (unknown, not a search, ...): the message says what to do."""


@dataclass(frozen=True)
class Resumed:
    run_id: str
    settings: dict[str, Any]  # the run's stored settings (problems, platforms, config)
    chain: tuple[str, ...]  # this run and the runs it resumed, newest first
    stored: Mapping[str, EvalResult]  # candidate id -> its stored evaluation
    replayed: set[str] = field(default_factory=set)  # candidate ids answered from `stored`


def load_run(reader: Any, ref: str) -> Resumed:
    """The search run `ref` (an id or a unique prefix), its ancestors and their results."""
    from kforge_search.store.to_eval import run_results

    chain: list[str] = []
    settings: dict[str, Any] = {}
    at: str | None = ref
    while at:
        rows = reader.query(
            "SELECT id, kind, config FROM runs WHERE id LIKE ? ORDER BY started_at", [f"{at}%"]
        ).rows
        if len(rows) != 1:
            found = "no run" if not rows else f"{len(rows)} runs"
            raise ResumeError(
                f"{found} matching {at!r}: give a run id as the search printed it at its "
                'end, or see `kforge db query "SELECT id, kind, status FROM runs"`'
            )
        run_id, kind, config = rows[0]
        if kind != "search":
            raise ResumeError(f"run {run_id} is a {kind} run: only search runs can be resumed")
        data = json.loads(config or "{}")
        if not chain:
            settings = data
        chain.append(run_id)
        at = data.get("resumed_from")
        if at in chain:
            break
    return Resumed(chain[0], settings, tuple(chain), run_results(reader, chain))


def _stored(request: Request, platform: str, resumed: Resumed) -> EvalResult | None:
    """The resumed run's evaluation of this request's draft, if it has one (noted as
    replayed)."""
    from kforge_search.store.ids import candidate_id

    cid = candidate_id(request.source, platform)
    stored = resumed.stored.get(cid)
    if stored is None or stored.platform != platform:
        return None
    resumed.replayed.add(cid)
    return stored


def replaying(evaluate_many: EvaluateMany, platform: str, resumed: Resumed) -> EvaluateMany:
    """`evaluate_many` that answers drafts evaluated by the resumed run(s) from the store."""

    def wrapped(requests: Sequence[Request]) -> Iterator[tuple[str, EvalResult]]:
        fresh = []
        for request in requests:
            stored = _stored(request, platform, resumed)
            if stored is not None:
                yield request.key, stored
            else:
                fresh.append(request)
        if fresh:
            yield from evaluate_many(fresh)

    return wrapped


class Replaying:
    """`Evaluations` that answers drafts evaluated by the resumed run(s) from the store and
    submits the others to `inner`. A poll returns the stored answers waiting, in the order
    they were submitted, before it asks `inner`."""

    def __init__(self, inner: Evaluations, platform: str, resumed: Resumed):
        self.inner, self.platform, self.resumed = inner, platform, resumed
        self._answered: deque[Evaluated] = deque()

    @property
    def capacity(self) -> int:
        return self.inner.capacity

    def submit(self, request: Request) -> None:
        stored = _stored(request, self.platform, self.resumed)
        if stored is None:
            self.inner.submit(request)
        else:
            self._answered.append((request.key, stored))

    def poll(self, timeout: float | None = None) -> list[Evaluated]:
        if self._answered:
            answered, self._answered = list(self._answered), deque()
            return answered
        return self.inner.poll(timeout)
