"""Lineage steps in flight, without a barrier between them.

A step starts with its lineage's proposal (in a thread when the lineage may propose beside
others: an LLM agent, a lineage actor; else here, holding agents.base.SERIAL), its drafts go
to its platform's `Evaluations`, and it is recorded, and given to `on_step`, as soon as its
results are in, while other steps still propose or evaluate. A draft whose result the
search has (`known`: another lineage wrote the same kernel) or is waiting for (another
step's request) is not evaluated again. The engine (steady-state evolution) and
`generation.run_generation` (one step of each lineage) both drive a `Stepper`. No Ray here.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import TracebackType

from kforge_search.agents.base import SERIAL, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.llm import loop
from kforge_search.problem import Problem, source_hash
from kforge_search.search.evaluations import Evaluations, Request
from kforge_search.search.lineage import Lineage, Proposal, Step

MAX_PROPOSING = 8  # lineages whose agents may wait for a model at once
POLL_S = 0.05  # how long one poll waits while proposals are running too

OnStep = Callable[[Lineage, Step], None]


def result_key(problem: Problem, source: str) -> str:
    """Which evaluations are the same: the problem (at its sizes) and the normalized source."""
    return f"{problem.id}|{problem.sizes_key}|{source_hash(source)}"


def concurrent(lineage: Lineage) -> bool:
    """Whether the lineage may propose beside others: it lives in its own actor, or its
    agent says its proposals may overlap (an LLM agent mostly waits for its model)."""
    agent = getattr(lineage, "agent", None)
    return bool(getattr(lineage, "remote", False) or getattr(agent, "concurrent", False))


@dataclass
class _Flight:
    """One step between its start and its record."""

    lineage: Lineage
    proposal: Proposal | None = None  # None while the agent is writing it
    keys: tuple[str, ...] = ()  # result key per draft
    asked: tuple[str | None, ...] = ()  # per draft: the request this step made for it
    waiting: set[str] = field(default_factory=set)  # result keys still to come


class Stepper:
    """Steps of many lineages in flight at once; at most one per lineage."""

    def __init__(
        self,
        evaluations: Mapping[str, Evaluations],
        known: dict[str, EvalResult] | None = None,
        on_step: OnStep | None = None,
        concurrency: int = MAX_PROPOSING,
    ):
        """`evaluations`: per platform name; `known`: result key -> result, shared with the
        caller and added to."""
        if concurrency < 1:
            raise ValueError(f"concurrency={concurrency}: needs >= 1")
        self.evaluations, self.on_step = evaluations, on_step
        self.known = {} if known is None else known
        self.concurrency = concurrency
        self._threads: ThreadPoolExecutor | None = None
        self._flights: dict[str, _Flight] = {}  # lineage id -> its step in flight
        self._proposing: dict[Future[Proposal], str] = {}  # -> lineage id
        self._requests: dict[
            str, tuple[Evaluations, str]
        ] = {}  # request key -> (where, result key)
        self._evaluating: dict[str, str] = {}  # result key -> the request evaluating it
        self._owner: dict[str, str] = {}  # result key -> the request that evaluated it
        self._complete: deque[str] = deque()  # lineage ids whose results are all in
        self._results: deque[tuple[str, EvalResult]] = deque()  # polled, not taken in yet

    # -- state ------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether any step is in flight."""
        return bool(self._flights)

    def busy(self, lineage: Lineage) -> bool:
        return lineage.lineage_id in self._flights

    def in_flight(self, platform: str) -> int:
        """Steps of `platform`'s lineages in flight (proposing or evaluating)."""
        return sum(1 for f in self._flights.values() if f.lineage.platform.name == platform)

    @property
    def proposing(self) -> int:
        """Steps whose agent is still writing their drafts."""
        return sum(1 for f in self._flights.values() if f.proposal is None)

    @property
    def evaluating(self) -> int:
        """Requests submitted and not answered yet."""
        return len(self._requests)

    def kept_ms(self, problem: Problem, platform: str) -> float | None:
        """The fastest time of a draft of `problem` on `platform` that the search keeps
        (verified, timed meaningfully, not failing the unseen sizes), None before one: a
        draft no faster cannot win, so its unseen sizes' check is spared. The search's, not
        the lineage's: a result is shared by every lineage that writes the same kernel."""
        prefix = f"{problem.id}|{problem.sizes_key}|"  # result_key's, less the source's
        times = [
            r.timing.p50_ms
            for key, r in self.known.items()
            if key.startswith(prefix)
            and r.platform == platform
            and r.ok
            and r.generalizes != "no"
            and r.timing is not None
            and r.timing.meaningful
        ]
        return min(times, default=None)

    # -- work -------------------------------------------------------------------------------
    def start(
        self,
        lineage: Lineage,
        budget: int,
        references: Sequence[Reference] = (),
        remaining: int | None = None,
    ) -> None:
        """Begin a step of `lineage`: its proposal runs (in a thread or here) and its drafts
        are submitted; it is recorded by a later `wait`."""
        if lineage.lineage_id in self._flights:
            raise ValueError(f"lineage {lineage.lineage_id!r} has a step in flight already")
        if lineage.platform.name not in self.evaluations:
            raise ValueError(f"no evaluator for platform {lineage.platform.name}")
        self._flights[lineage.lineage_id] = _Flight(lineage)
        args = (budget, tuple(references), remaining)
        if concurrent(lineage):
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.concurrency)
            self._proposing[self._threads.submit(lineage.propose, *args)] = lineage.lineage_id
        else:
            with SERIAL:  # tracing is not thread-safe
                proposal = lineage.propose(*args)
            self._submit(lineage.lineage_id, proposal)

    def wait(self) -> list[Step]:
        """Block until a step is recorded (each given to `on_step` first); the steps
        recorded, [] when none is in flight. One result is taken in per call (it may
        complete several steps that waited for it), so what the caller does between calls
        does not depend on how the evaluations were batched."""
        while self._flights:
            if self._complete:
                return [self._record(self._complete.popleft())]
            if self._results:
                return self._take(*self._results.popleft())
            done = [f for f in self._proposing if f.done()]
            for future in sorted(done, key=lambda f: self._proposing[f]):
                self._submit(self._proposing.pop(future), future.result())
            if not done:
                self._gather()
        return []

    def _submit(self, lineage_id: str, proposal: Proposal) -> None:
        flight = self._flights[lineage_id]
        lin = flight.lineage
        flight.proposal = proposal
        flight.keys = tuple(result_key(lin.problem, d.source) for d in proposal.drafts)
        asked: list[str | None] = []
        evaluations = self.evaluations[lin.platform.name]
        for i, (key, draft) in enumerate(zip(flight.keys, proposal.drafts, strict=True)):
            if key in self.known or key in self._evaluating:
                asked.append(None)  # the search has its result, or will have it
                continue
            request = Request(f"{lineage_id}/{lin.generation}/{i}", draft.source, lin.problem,
                              self.kept_ms(lin.problem, lin.platform.name))  # fmt: skip
            self._requests[request.key] = (evaluations, key)
            self._evaluating[key] = request.key
            evaluations.submit(request)
            asked.append(request.key)
        flight.asked = tuple(asked)
        flight.waiting = {k for k in flight.keys if k not in self.known}
        if not flight.waiting:
            self._complete.append(lineage_id)

    def _gather(self) -> None:
        """Block until a proposal is done or evaluations end (those go to `_results`)."""
        where = list({id(e): e for e, _ in self._requests.values()}.values())
        while True:
            if not where:
                assert self._proposing, "a step in flight neither proposes nor evaluates"
                wait(self._proposing, return_when=FIRST_COMPLETED)
                return
            only = len(where) == 1 and not self._proposing
            for evaluations in where:
                got = evaluations.poll(None if only else POLL_S)
                if got:
                    self._results.extend(got)
                    return
            if only:
                lost = sorted(self._requests)
                raise RuntimeError(f"no result for {lost}: the evaluator lost them")
            if any(f.done() for f in self._proposing):
                return

    def _take(self, request_key: str, result: EvalResult) -> list[Step]:
        """Take in one evaluation; record the steps it completes."""
        asked = self._requests.pop(request_key, None)
        if asked is None:  # not ours (answered already): nothing waits for it
            return []
        key = asked[1]
        self.known[key], self._owner[key] = result, request_key
        self._evaluating.pop(key, None)
        done = []
        for lineage_id, flight in self._flights.items():
            if key in flight.waiting:
                flight.waiting.discard(key)
                if not flight.waiting:
                    done.append(lineage_id)
        return [self._record(lineage_id) for lineage_id in done]

    def _record(self, lineage_id: str) -> Step:
        flight = self._flights.pop(lineage_id)
        lin, proposal = flight.lineage, flight.proposal
        assert proposal is not None
        step = lin.record(proposal.drafts, [self.known[k] for k in flight.keys])
        reused = tuple(
            asked is None or self._owner.get(key) != asked
            for key, asked in zip(flight.keys, flight.asked, strict=True)
        )
        step = dataclasses.replace(proposal.counted(step), reused=reused)
        if self.on_step is not None:
            self.on_step(lin, step)
        return step

    # -- lifetime ---------------------------------------------------------------------------
    def close(self, interrupted: bool = False) -> None:
        """Stop the proposals in flight (an interrupt also ends the process's LLM calls:
        their threads return at once); results still out are dropped."""
        for future in self._proposing:
            future.cancel()
        if interrupted:  # Ctrl-C or SIGTERM: the whole process stops
            loop.cancel_all()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Stepper:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(interrupted=isinstance(exc, KeyboardInterrupt))
