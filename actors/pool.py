"""A pool of evaluator actors for one platform: a plain class that owns the actors.

Requests queue here and go to idle actors (one candidate per actor at a time); `poll`
collects finished evaluations with `ray.wait`. When an actor dies mid-candidate (killed,
its node lost, out of memory), it is replaced by a new actor and the candidate is tried
once more; a second death gives an INFRA_ERROR result (not the candidate's verdict) and the
search goes on. Errors raised inside the evaluator give an INFRA_ERROR at once: they would
recur.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.exceptions import GetTimeoutError, RayError, RayTaskError

from kforge_search.actors.evaluator import EvaluatorActor
from kforge_search.actors.resources import ResourceError, evaluator_options
from kforge_search.evaluator import EvalConfig, EvalResult, Status
from kforge_search.platforms import Platform, get_platform
from kforge_search.problem import Problem, ProblemError, source_hash

REFERENCE_STAGE = "reference"  # the stage of a result not judged: the reference failed

MAX_ATTEMPTS = 2  # the first try and one retry on a new actor
# problems an actor counts as warm: the last it evaluated. An evaluator keeps the references
# and oracles (children with the reference's model on the device) of its last problems
# (EvalConfig.max_oracles; a search on one GPU keeps 2 an actor, cli/execute.py: a
# problem's sizes and its unseen sizes). Sent any problem, each of 8 actors saw all 8
# problems of a search and read each evaluation's reference back from the node's store
# (H100: 0.91 s an evaluation; 0.53 s with the actor chosen by problem and 16 references)
WARM_PROBLEMS = 2


def pick_work(
    idle: Sequence[int], wanted: Sequence[str], warm: dict[int, deque[str]], head_first: bool
) -> tuple[int, int]:
    """(idle actor, position in the queue) for the next dispatch, `wanted` the queued
    requests' problems in order: a request to an actor that evaluated its problem last (then
    lately), else the queue's head to the actor idle longest (the first); only the head
    where `head_first` (it has been passed over long enough). One actor idles at a time in
    a steady search: its choice is among the queued requests."""
    for back in range(1, WARM_PROBLEMS + 1):
        for i, problem_id in enumerate(wanted[:1] if head_first else wanted):
            for slot in idle:
                recent = warm.get(slot, ())
                if len(recent) >= back and recent[-back] == problem_id:
                    return slot, i
    return idle[0], 0


@dataclass(frozen=True)
class EvalRequest:
    """One candidate to evaluate; `key` is the caller's name for it (unique while pending)."""

    key: str
    source: str
    problem: Problem
    unseen_below_ms: float | None = None  # search.evaluations.Request's


@dataclass(frozen=True)
class EvalOutcome:
    request: EvalRequest
    result: EvalResult
    attempts: int  # 2 when the first actor died mid-candidate


@dataclass(frozen=True)
class _Running:
    slot: int
    request: EvalRequest
    attempt: int


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class EvaluatorPool:
    """`size` evaluator actors of one platform, with Ray resources from the platform."""

    def __init__(
        self,
        platform: Platform | str,
        size: int = 1,
        config: EvalConfig | None = None,
        *,
        autoscaling: bool = False,
        per_gpu: int = 1,
    ):
        self.platform = get_platform(platform) if isinstance(platform, str) else platform
        if not self.platform.runnable:
            raise ValueError(f"platform {self.platform.name} is declared only; it cannot run")
        self.config = config  # None: each actor's own defaults (memory limit of its node)
        self.options = evaluator_options(
            self.platform,
            size,
            ray.cluster_resources(),
            ray.available_resources(),
            autoscaling=autoscaling,
            per_gpu=per_gpu,
        )
        self._actors: list[ActorHandle] = [self._spawn() for _ in range(size)]
        self._idle: deque[int] = deque(range(size))
        self._queue: deque[tuple[EvalRequest, int]] = deque()
        self._running: dict[ray.ObjectRef, _Running] = {}
        self._warm: dict[int, deque[str]] = {}  # by slot: the problems it evaluated last
        self._passed = 0  # dispatches that passed the queue's head over (pick_work)
        self.retries = 0  # candidates sent again after their actor died
        self.replaced = 0  # actors replaced

    def _spawn(self) -> ActorHandle:
        return EvaluatorActor.options(**self.options).remote(self.config)

    # -- state ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self._actors)

    @property
    def pending(self) -> int:
        """Requests queued or being evaluated."""
        return len(self._queue) + len(self._running)

    @property
    def idle(self) -> int:
        """Actors with nothing to do: submit this many more to keep the pool busy."""
        return max(0, len(self._idle) - len(self._queue))

    def running(self) -> dict[str, ActorHandle]:
        """The actor evaluating each running request, by request key."""
        return {run.request.key: self._actors[run.slot] for run in self._running.values()}

    def wait_ready(self, timeout_s: float = 120.0) -> list[int]:
        """Wait until every actor is up (call before submitting); their process ids."""
        try:
            return ray.get([a.ping.remote() for a in self._actors], timeout=timeout_s)
        except GetTimeoutError:
            raise ResourceError(
                f"{self.size} {self.platform.name} evaluator actors did not start in "
                f"{timeout_s:g} s; each asks for {self.options}, the cluster has "
                f"{ray.cluster_resources()} (free: {ray.available_resources()})"
            ) from None

    def lanes(self, timeout_s: float = 120.0) -> dict[str, int]:
        """How many of the pool's actors time in each lane, by lane ("<node ip>/<node
        id>/<device lock key>": one per GPU, or a node's CPUs); call once they are up."""
        found = ray.get(
            [a.lane.remote(self.platform.device_kind) for a in self._actors], timeout=timeout_s
        )
        return dict(sorted(Counter(found).items()))

    def unavailable(self, timeout_s: float = 120.0) -> dict[str, str]:
        """Lanes where the platform cannot run (a GPU node whose torch has no CUDA, a CPU
        node without a compiler), with the reason; {} when it runs on every actor's node.
        The driver's own machine is not asked: on a cluster it may have no GPU."""
        lanes = ray.get([a.lane.remote(self.platform.device_kind) for a in self._actors],
                        timeout=timeout_s)  # fmt: skip
        reasons = ray.get(
            [a.unavailable.remote(self.platform.name) for a in self._actors], timeout=timeout_s
        )
        return {lane: why for lane, why in zip(lanes, reasons, strict=True) if why}

    # -- work -------------------------------------------------------------------------------
    def submit(self, request: EvalRequest) -> None:
        keys = {r.key for r, _ in self._queue} | {run.request.key for run in self._running.values()}
        if request.key in keys:
            raise ValueError(f"request {request.key!r} is already pending: keys must be unique")
        self._queue.append((request, 1))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._idle and self._queue:
            wanted = [request.problem.id for request, _ in self._queue]
            slot, at = pick_work(self._idle, wanted, self._warm, self._passed >= self.size)
            request, attempt = self._queue[at]
            del self._queue[at]
            self._passed = self._passed + 1 if at else 0
            self._idle.remove(slot)
            warm = self._warm.setdefault(slot, deque(maxlen=WARM_PROBLEMS))
            if request.problem.id in warm:
                warm.remove(request.problem.id)
            warm.append(request.problem.id)
            ref = self._actors[slot].evaluate.remote(
                request.source, request.problem, self.platform.name, request.unseen_below_ms
            )
            self._running[ref] = _Running(slot, request, attempt)

    def poll(self, timeout_s: float | None = None) -> list[EvalOutcome]:
        """Wait until at least one evaluation finished (or `timeout_s` passed) and return
        every finished one; [] when nothing is pending or on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        done: list[EvalOutcome] = []
        while self._running and not done:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(self._running), num_returns=1, timeout=left)
            if not ready:
                break
            ready, _ = ray.wait(list(self._running), num_returns=len(self._running), timeout=0)
            for ref in ready:
                if (outcome := self._collect(ref)) is not None:
                    done.append(outcome)
            self._dispatch()
        return done

    def map(self, requests: Iterable[EvalRequest]) -> Iterator[EvalOutcome]:
        """Evaluate all `requests`; outcomes in the order they finish."""
        for request in requests:
            self.submit(request)
        while self.pending:
            yield from self.poll()

    def evaluate_many(self, requests: Iterable[Any]) -> Iterator[tuple[str, EvalResult]]:
        """`(key, result)` for requests with `key`, `source` and `problem` (a search
        generation's `Request`s), in the order they finish."""
        asked = (_asked(r) for r in requests)
        for outcome in self.map(asked):
            yield outcome.request.key, outcome.result

    def evaluations(self) -> PoolEvaluations:
        """This pool as a search's `Evaluations` (submit, poll, capacity)."""
        return PoolEvaluations(self)

    def _collect(self, ref: ray.ObjectRef) -> EvalOutcome | None:
        run = self._running.pop(ref)
        try:
            result = ray.get(ref)
        except RayTaskError as exc:  # the evaluator raised: it would raise again
            self._idle.append(run.slot)
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            if isinstance(cause, ProblemError):  # not the candidate's fault, nor the harness's
                why = f"not judged: the problem's reference failed: {_first_line(cause)}"
                result = self._infra_error(run.request, why, stage=REFERENCE_STAGE)
            else:
                why = f"the evaluator raised {type(cause).__name__}: {_first_line(cause)}"
                result = self._infra_error(run.request, why)
        except RayError as exc:  # the actor died mid-candidate
            self._replace(run.slot)
            if run.attempt < MAX_ATTEMPTS:
                self.retries += 1
                self._queue.appendleft((run.request, run.attempt + 1))
                return None
            why = (
                f"the evaluator actor died {run.attempt} times while evaluating this "
                f"candidate (last: {type(exc).__name__}: {_first_line(exc)}); it was not "
                "judged. A lost node, memory exhausted on the node, or a candidate that "
                "brings down its evaluator's process"
            )
            result = self._infra_error(run.request, why)
        else:
            self._idle.append(run.slot)
        return EvalOutcome(run.request, result, run.attempt)

    def _replace(self, slot: int) -> None:
        with contextlib.suppress(RayError, ValueError):
            ray.kill(self._actors[slot], no_restart=True)
        self._actors[slot] = self._spawn()
        self._warm.pop(slot, None)  # a new actor: nothing of its own yet
        self.replaced += 1
        self._idle.append(slot)

    def _infra_error(self, request: EvalRequest, message: str, stage: str = "actor") -> EvalResult:
        problem = request.problem
        return EvalResult(
            status=Status.INFRA_ERROR,
            message=message,
            stage=stage,
            problem_id=problem.id,
            problem_name=problem.name,
            platform=self.platform.name,
            policy=(self.config or EvalConfig()).policy,
            candidate_hash=source_hash(request.source, self.platform.name),
            sizes=tuple(sorted(problem.sizes.items())),
        )

    def check_references(
        self, problems: Sequence[Problem], timeout_s: float | None = None
    ) -> dict[str, str]:
        """Run every problem's reference on the pool's actors (spread over them) before a
        search: problem id -> why its reference cannot run (it raised or exceeded a limit of
        the evaluator); a problem left out runs. Call it while nothing is pending."""
        if self.pending:
            raise ValueError(f"{self.pending} evaluations pending: check references first")
        calls = {
            self._actors[i % self.size].check_reference.remote(p, self.platform.name): (i, p)
            for i, p in enumerate(problems)
        }
        failed: dict[str, str] = {}
        replaced: set[int] = set()
        for ref, (i, problem) in calls.items():
            try:
                why = ray.get(ref, timeout=timeout_s)
            except RayTaskError as exc:
                cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                why = f"the evaluator raised {type(cause).__name__}: {_first_line(cause)}"
            except RayError as exc:  # the actor died running it (or did not answer in time)
                if i % self.size not in replaced:  # idle: a new actor takes its slot
                    replaced.add(i % self.size)
                    self._idle.remove(i % self.size)
                    self._replace(i % self.size)
                why = f"the evaluator actor ended running the reference: {_first_line(exc)}"
            if why:
                failed[problem.id] = why
        return failed

    # -- lifetime ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Kill every actor; pending requests are dropped."""
        for actor in self._actors:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(actor, no_restart=True)
        self._queue.clear()
        self._running.clear()

    def __enter__(self) -> EvaluatorPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


def _asked(request: Any) -> EvalRequest:
    """A search's `Request` (or anything with its fields) as the pool's."""
    below = getattr(request, "unseen_below_ms", None)
    return EvalRequest(request.key, request.source, request.problem, below)


class PoolEvaluations:
    """An `EvaluatorPool` as `search.evaluations.Evaluations`: requests with `key`, `source`
    and `problem` (a search's `Request`s) go to the pool's queue, `poll` returns
    `(key, result)` pairs as they end; `capacity` is the pool's size."""

    def __init__(self, pool: EvaluatorPool):
        self.pool = pool

    @property
    def capacity(self) -> int:
        return self.pool.size

    def submit(self, request: Any) -> None:
        self.pool.submit(_asked(request))

    def poll(self, timeout: float | None = None) -> list[tuple[str, EvalResult]]:
        return [(o.request.key, o.result) for o in self.pool.poll(timeout)]


__all__ = [
    "MAX_ATTEMPTS",
    "REFERENCE_STAGE",
    "EvalOutcome",
    "EvalRequest",
    "EvaluatorPool",
    "PoolEvaluations",
    "ResourceError",
]
