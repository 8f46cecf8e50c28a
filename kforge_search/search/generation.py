"""One generation of a search: every live lineage proposes, the drafts are evaluated (a
pool of evaluator actors runs them in parallel) in waves as the proposals arrive, and each
lineage records its results. No Ray here: `evaluate_many` is the pool's
(`EvaluatorPool.evaluate_many`) in a search, or `sequential(evaluator, platform)` in a single
process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from kforge_search.agents.base import SERIAL, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.llm import loop
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


MAX_PROPOSING = 8  # lineages whose agents may wait for a model at once


def _concurrent(lineage: Lineage) -> bool:
    """Whether the lineage may propose beside others: it lives in its own actor, or its
    agent says its proposals may overlap (an LLM agent mostly waits for its model)."""
    agent = getattr(lineage, "agent", None)
    return bool(getattr(lineage, "remote", False) or getattr(agent, "concurrent", False))


def run_generation(
    lineages: Sequence[Lineage],
    evaluate_many: EvaluateMany,
    budget: int,
    references: Mapping[str, Sequence[Reference]] | None = None,
    known: dict[str, EvalResult] | None = None,
    *,
    remaining: Mapping[str, int] | None = None,
    on_step: Callable[[Lineage, Step], None] | None = None,
    concurrency: int = MAX_PROPOSING,
) -> list[Step]:
    """Each lineage proposes up to `budget` drafts; all are evaluated; one step each.

    Lineages that may propose side by side (`_concurrent`: LLM agents, lineage actors) do so
    in up to `concurrency` threads, the others one after another in this thread (holding
    agents.base.SERIAL). Drafts go to `evaluate_many` in waves, as their proposals arrive: a
    lineage whose model is slow delays no other lineage's evaluation. Each lineage's step is
    recorded, and given to `on_step`, as soon as its results are in; the steps are returned
    in the order of `lineages`. `remaining`: per lineage id, the evaluations the search has
    left for it (told to its agent).

    `known` maps `result_key(problem, source)` to results the search already has: a draft
    found there (another lineage wrote the same kernel) takes that result and is not
    evaluated again, and so is a second copy within this generation. New results are added.
    """
    ids = [lin.lineage_id for lin in lineages]
    if len(set(ids)) != len(ids):
        raise ValueError(f"lineage ids must be unique in a generation: {ids}")
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: needs >= 1")
    refs, left = references or {}, remaining or {}
    known = {} if known is None else known

    def propose(lin: Lineage) -> Proposal:
        return lin.propose(budget, refs.get(lin.lineage_id, ()), left.get(lin.lineage_id))

    beside = [lin for lin in lineages if _concurrent(lin)]
    wave = _Wave(evaluate_many, known, on_step)
    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(beside))) if beside else None
    futures: dict[Future[Proposal], Lineage] = {}
    try:
        futures.update({pool.submit(propose, lin): lin for lin in beside} if pool else {})
        ready: list[tuple[Lineage, Proposal]] = []
        for lin in lineages:  # the others here, while those wait for their models
            if not _concurrent(lin):
                with SERIAL:  # tracing is not thread-safe
                    ready.append((lin, propose(lin)))
        pending = set(futures)
        while ready or pending:
            done = {f for f in pending if f.done()}
            if not ready and not done:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
            pending -= done
            ready += [(futures[f], f.result()) for f in done]
            wave.run(ready)
            ready = []
    except BaseException as exc:
        for future in futures:
            future.cancel()
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM: the whole process stops
            loop.cancel_all()  # the calls in flight end: their threads return at once
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return [wave.steps[i] for i in ids]


class _Wave:
    """Evaluates the drafts of the proposals at hand and records each lineage's step as soon
    as its results are in; remembers who evaluated what across the waves of a generation."""

    def __init__(
        self,
        evaluate_many: EvaluateMany,
        known: dict[str, EvalResult],
        on_step: Callable[[Lineage, Step], None] | None,
    ):
        self.evaluate_many, self.known, self.on_step = evaluate_many, known, on_step
        self.owner: dict[str, str] = {}  # result key -> the request key that evaluated it
        self.steps: dict[str, Step] = {}

    def run(self, proposals: Sequence[tuple[Lineage, Proposal]]) -> None:
        requests: dict[str, Request] = {}  # result key -> the one request that evaluates it
        waiting: dict[str, set[str]] = {}  # lineage id -> result keys it still needs
        for lin, proposal in proposals:
            keys = {result_key(lin.problem, d.source) for d in proposal.drafts}
            waiting[lin.lineage_id] = {k for k in keys if k not in self.known}
            for i, draft in enumerate(proposal.drafts):
                key = result_key(lin.problem, draft.source)
                if key not in self.known and key not in requests:
                    requests[key] = Request(f"{lin.lineage_id}/{i}", draft.source, lin.problem)
        by_id = {lin.lineage_id: (lin, proposal) for lin, proposal in proposals}
        for lineage_id, keys in waiting.items():
            if not keys:
                self._record(*by_id[lineage_id])
        of_request = {r.key: key for key, r in requests.items()}
        for request_key, result in self.evaluate_many(list(requests.values())):
            key = of_request.pop(request_key, None)
            if key is None:
                continue
            self.known[key], self.owner[key] = result, request_key
            for lineage_id, keys in waiting.items():
                if key in keys:
                    keys.discard(key)
                    if not keys:
                        self._record(*by_id[lineage_id])
        if of_request:
            raise RuntimeError(f"no result for {sorted(of_request)}: the evaluator lost them")

    def _record(self, lin: Lineage, proposal: Proposal) -> None:
        keys = [result_key(lin.problem, d.source) for d in proposal.drafts]
        step = lin.record(proposal.drafts, [self.known[k] for k in keys])
        reused = tuple(self.owner.get(k) != f"{lin.lineage_id}/{i}" for i, k in enumerate(keys))
        step = dataclasses.replace(proposal.counted(step), reused=reused)
        self.steps[lin.lineage_id] = step
        if self.on_step is not None:
            self.on_step(lin, step)


def result_key(problem: Problem, source: str) -> str:
    """Which evaluations are the same: the problem (at its sizes) and the normalized source."""
    return f"{problem.id}|{problem.sizes_key}|{source_hash(source)}"
