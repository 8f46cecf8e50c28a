"""Steady-state evolution (no generation barrier): lineages step as their own results come
in, through evaluators that take different times (threads that sleep what a draft says).

The agents and the evaluator are small fakes: what is tested is the scheduling of the
search (search/engine.py, search/steps.py), not the kernels."""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import pytest

from kforge_search.agents.base import Draft, Support
from kforge_search.evaluator.result import Baseline, EvalResult, Status, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.budget import Budget
from kforge_search.search.engine import Search, SearchConfig
from kforge_search.search.evaluations import Batched, Request
from kforge_search.search.resume import Replaying, Resumed
from kforge_search.store.ids import candidate_id

CPP = get_platform("cpu-cpp")
PROBLEM = resolve_problem("level1/10_elementwise_chain", size_set="ci")
OTHER = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")


class Agent:
    """Writes a new draft each step whose time (`MS`), evaluation delay (`SLEEP`) and
    verdict (`OK`) are this agent's."""

    def __init__(self, name: str, ms: float = 1.0, sleep: float = 0.0, ok: bool = True):
        self.name, self.ms, self.sleep, self.ok = name, ms, sleep, ok
        self.calls = 0

    def supports(self, problem, platform) -> Support:
        return Support(True)

    def propose(self, context) -> list[Draft]:
        self.calls += 1
        ms = self.ms / (1 + 0.01 * len(context.parents))  # each step a little faster
        source = (
            f"NAME = {self.name!r}\nSTEP = {len(context.parents)}\nSEED = {context.seed}\n"
            f"MS = {ms!r}\nSLEEP = {self.sleep!r}\nOK = {self.ok!r}\n"
        )
        parents = tuple(p.draft.id for p in context.parents[-1:] if p.result.ok)
        return [Draft(source, context.platform.name, self.name, "fake", parents=parents)]


def _value(source: str, name: str) -> str:
    return next(ln.split(" = ")[1] for ln in source.splitlines() if ln.startswith(f"{name} = "))


def evaluate(request: Request) -> EvalResult:
    """The fake evaluation: sleeps, then times the draft as it says."""
    time.sleep(float(_value(request.source, "SLEEP")))
    ms, ok = float(_value(request.source, "MS")), _value(request.source, "OK") == "True"
    timing = TimingStats("fake", 1, ms, ms, ms)
    eager = Baseline("eager", True, TimingStats("fake", 1, 10.0, 10.0, 10.0))
    problem = request.problem
    return EvalResult(
        status=Status.OK if ok else Status.INCORRECT,
        message="fake",
        stage="done" if ok else "verify",
        problem_id=problem.id,
        problem_name=problem.name,
        platform=CPP.name,
        policy="strict",
        candidate_hash=candidate_id(request.source, CPP.name),
        timing=timing if ok else None,
        baselines=(eager,),
    )


class Threaded:
    """`Evaluations` with `workers` threads, like an evaluator pool: notes every request
    submitted and the most requests in flight (submitted, not yet returned) at once."""

    def __init__(self, workers: int = 2):
        self.capacity = workers
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[Future[EvalResult], str] = {}
        self.submitted: list[tuple[float, Request]] = []
        self.most = 0
        self._lock = threading.Lock()

    def submit(self, request: Request) -> None:
        self.submitted.append((time.monotonic(), request))
        self._futures[self._pool.submit(evaluate, request)] = request.key
        self.most = max(self.most, len(self._futures))

    def poll(self, timeout: float | None = None) -> list[tuple[str, EvalResult]]:
        if not self._futures:
            return []
        done, _ = wait(self._futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return [(self._futures.pop(f), f.result()) for f in done]


def _search(agents, evaluations, budget=None, on_step=None, problems=(PROBLEM,), **config):
    config = {"lineages": len(agents), "fork": 0, "retire": 0, **config}
    return Search(
        list(problems), [CPP], agents, {CPP.name: evaluations}, SearchConfig(**config),
        budget or Budget(max_candidates=1000), on_step=on_step,
    )  # fmt: skip


def test_a_fast_lineage_steps_on_while_a_slow_evaluation_runs():
    steps: list[str] = []
    search = _search(
        [Agent("fast", sleep=0.02), Agent("slow", sleep=1.5)],
        Threaded(workers=2),
        on_step=lambda lineage, step: steps.append(lineage.lineage_id),
        generations=6,
        in_flight_per_evaluator=1,
    )
    result = search.run()
    fast, slow = (lin.lineage_id for lin in search.lineages)
    first_slow = steps.index(slow)
    # a generation barrier would hold the fast lineage at one step until the slow one is in
    assert steps[:first_slow].count(fast) >= 3, steps
    assert steps.count(fast) == steps.count(slow) == 6 and result.generations == 6
    assert result.stop == "generations"


@pytest.mark.parametrize(("workers", "per_evaluator"), [(2, 2), (1, 3)])
def test_drafts_in_flight_never_exceed_the_bound(workers, per_evaluator):
    evaluations = Threaded(workers)
    agents = [Agent(f"a{i}", sleep=0.01 * (i % 3 + 1)) for i in range(6)]
    seen: list[int] = []
    search = _search(
        agents,
        evaluations,
        on_step=lambda lineage, step: seen.append(search.stepper.evaluating),
        generations=4,
        in_flight_per_evaluator=per_evaluator,
    )
    search.run()
    bound = workers * per_evaluator
    assert evaluations.most == bound  # the evaluators are kept fed, never flooded
    assert max(seen) <= bound and len(evaluations.submitted) == 6 * 4


def test_each_lineage_takes_its_generations_and_forks_go_on_from_their_parents_count():
    agents = [Agent("good", ms=1.0), Agent("mid", ms=2.0), Agent("bad", ms=4.0)]
    search = _search(agents, Threaded(2), generations=5, fork=1, retire=1, max_alive=4)
    result = search.run()
    assert result.forked and result.generations == 5
    by_id = {lin.lineage_id: lin for lin in search.lineages}
    for lin in search.alive:  # every live lineage used its steps, none more
        assert lin.generation == 5
    for lineage_id in result.forked:  # a fork starts from its parent's best, adopted ...
        child = by_id[lineage_id]
        first, *own = child.members
        assert first.verified and first.lineage_id == lineage_id
        assert any(first.candidate_id == m.candidate_id for m in result.members if m is not first)
        # ... and goes on from its parent's count (to 5, unless it was retired)
        start = own[0].generation
        assert start >= 1 and [m.generation for m in own] == list(range(start, start + len(own)))
        assert child not in search.alive or start + len(own) == 5
    assert all(m.generation < 5 for m in result.members)


def test_max_candidates_is_respected_exactly():
    evaluations = Threaded(2)
    agents = [Agent(f"a{i}", sleep=0.01) for i in range(3)]
    result = _search(agents, evaluations, Budget(max_candidates=7), generations=10).run()
    assert len(evaluations.submitted) == 7
    assert result.stop == "budget exhausted: max_candidates used 7 of 7"
    # two drafts a step: the seventh would not fit a step
    evaluations = Threaded(2)
    agents = [Agent(f"b{i}", sleep=0.01) for i in range(3)]
    result = _search(
        agents, evaluations, Budget(max_candidates=7), generations=10, drafts_per_step=2
    ).run()
    # the fake agent writes one draft a step: steps are held back for the second they may ask
    assert len(evaluations.submitted) <= 7
    assert result.stop.startswith("budget exhausted: max_candidates used")


def test_a_wall_clock_budget_stops_new_steps_and_lets_those_in_flight_finish():
    evaluations = Threaded(2)
    agents = [Agent(f"a{i}", sleep=0.15) for i in range(3)]
    steps = []
    search = _search(
        agents,
        evaluations,
        Budget(wall_clock_s=0.5),
        on_step=lambda lineage, step: steps.append(step),
        generations=50,
    )
    started = time.monotonic()
    result = search.run()
    assert result.stop.startswith("budget exhausted: wall_clock_s used")
    # no step starts after the budget is out (the check and the fake proposal take a little)
    assert max(t for t, _ in evaluations.submitted) - started < 0.5 + 0.1
    assert len(steps) == len(evaluations.submitted)  # every step in flight was recorded


def test_the_weakest_retire_the_strongest_fork_and_a_retired_step_in_flight_is_recorded():
    agents = [Agent("good", ms=1.0, sleep=0.02), Agent("mid", ms=2.0, sleep=0.02)]
    agents.append(Agent("bad", ms=8.0, sleep=0.5))
    after: list[tuple[str, int]] = []  # steps recorded of lineages no longer alive
    search = None

    def on_step(lineage, step):
        if lineage not in search.alive:
            after.append((lineage.lineage_id, step.generation))

    search = _search(
        agents,
        Threaded(2),
        on_step=on_step,
        generations=8,
        fork=1,
        retire=1,
        max_alive=4,
        in_flight_per_evaluator=2,
    )
    forked_busy = []
    fork = search._fork

    def checked_fork(parent):  # only a lineage with nothing in flight is forked
        forked_busy.append(search.stepper.busy(parent))
        return fork(parent)

    search._fork = checked_fork
    result = search.run()
    bad = next(lin for lin in search.lineages if lin.lineage_id.endswith("#2"))
    assert bad.lineage_id in result.retired and bad not in search.alive
    assert result.forked and not any(forked_busy)
    good = result.best[(PROBLEM.id, CPP.name)]
    assert good.lineage_id.endswith("#0") or good.lineage_id in result.forked
    # lineages retired with a step in flight: that step was recorded, and it was their last
    assert after, "no lineage was retired with a step in flight"
    by_id = {lin.lineage_id: lin for lin in search.lineages}
    for lineage_id, generation in after:
        assert lineage_id in result.retired and [g for i, g in after if i == lineage_id] == [
            generation
        ]
        assert (
            by_id[lineage_id].generation
            == generation + 1
            == by_id[lineage_id].members[-1].generation + 1
        )


def test_a_resumed_search_replays_the_run_and_goes_on():
    def run(budget, evaluations):
        agents = [Agent("x", ms=1.0), Agent("y", ms=3.0)]
        search = _search(agents, evaluations, Budget(max_candidates=budget), generations=6,
                         fork=1, retire=1, problems=(PROBLEM, OTHER))  # fmt: skip
        return search, search.run()

    asked: list[str] = []

    def evaluate_many(requests):  # one at a time, as they are taken: a single evaluator
        for r in requests:
            asked.append(r.source)
            yield r.key, evaluate(r)

    first, result = run(9, Batched(evaluate_many))
    assert len(asked) == 9
    stored = {m.candidate_id: lin.parents[i].result for lin in first.lineages
              for i, m in enumerate(lin.members)}  # fmt: skip
    resumed = Resumed("r1", {}, ("r1",), stored)
    before, asked[:] = list(asked), []
    again, more = run(20, Replaying(Batched(evaluate_many), CPP.name, resumed))
    assert resumed.replayed == {candidate_id(s, CPP.name) for s in before}  # all of the run
    assert not set(asked) & set(before) and len(asked) == 20 - 9  # nothing evaluated twice

    def history(search):
        return {lin.lineage_id: [m.candidate_id for m in lin.members] for lin in search.lineages}

    done, resumed_history = history(first), history(again)
    for lineage_id, members in done.items():  # each lineage went on from where it stopped
        assert resumed_history[lineage_id][: len(members)] == members
    assert len(more.members) > len(result.members)


def _requests(n: int) -> list[Request]:
    source = "NAME = {}\nMS = 1.0\nSLEEP = 0.0\nOK = True\n"
    return [Request(f"k{i}", source.format(i), PROBLEM) for i in range(n)]


def test_batched_evaluates_what_was_submitted_one_result_per_poll():
    asked: list[list[str]] = []

    def evaluate_many(requests):
        asked.append([r.key for r in requests])
        for r in requests:
            yield r.key, evaluate(r)

    batched = Batched(evaluate_many)
    a, b, c = _requests(3)
    assert batched.poll() == [] and batched.capacity == 1
    batched.submit(a)
    batched.submit(b)
    assert [k for k, _ in batched.poll()] == ["k0"]
    batched.submit(c)  # waits for the next batch
    assert [k for k, _ in batched.poll()] == ["k1"]
    assert [k for k, _ in batched.poll()] == ["k2"] and batched.poll() == []
    assert asked == [["k0", "k1"], ["k2"]]
    lossy = Batched(lambda requests: iter(()))
    lossy.submit(a)
    with pytest.raises(RuntimeError, match="the evaluator lost them"):
        lossy.poll()


def test_replaying_answers_stored_drafts_in_the_order_asked_before_the_evaluator():
    first, second, fresh, third = _requests(4)
    stored = {candidate_id(r.source, CPP.name): evaluate(r) for r in (first, second, third)}
    resumed = Resumed("r1", {}, ("r1",), stored)
    inner = Threaded(1)
    replaying = Replaying(inner, CPP.name, resumed)
    for request in (third, fresh, first, second):
        replaying.submit(request)
    assert [k for k, _ in replaying.poll(0)] == ["k3", "k0", "k1"]  # no wait, no evaluation
    assert [r.key for _, r in inner.submitted] == ["k2"] and replaying.capacity == 1
    assert [k for k, _ in replaying.poll()] == ["k2"]
    assert resumed.replayed == set(stored)


def test_each_request_carries_its_problems_best_kept_time_for_the_unseen_check():
    """A draft no faster than the best the search keeps for its problem cannot win: its
    request says that time (candidate_drive: its unseen sizes' check is spared). Another
    problem's results say nothing of it."""
    evaluations = Threaded(workers=1)
    search = _search(
        [Agent("a", ms=2.0), Agent("b", ms=1.0)],
        evaluations,
        problems=(PROBLEM, OTHER),
        generations=3,
        in_flight_per_evaluator=1,
    )
    search.run()
    seen: dict[str, list[float]] = {}  # problem -> times of the requests answered so far
    asked = 0
    for _, request in evaluations.submitted:
        times = seen.setdefault(request.problem.id, [])
        # one worker, one request in flight: each answered before the next is submitted
        assert request.unseen_below_ms == (min(times) if times else None), request.key
        asked += request.unseen_below_ms is not None
        times.append(float(_value(request.source, "MS")))
    assert len(seen) == 2 and asked >= 4


class Same(Agent):
    """Every lineage it writes for proposes the same draft at the same step (as the builtin
    agent's seed and fixed tuning steps are): no seed in its source."""

    def propose(self, context) -> list[Draft]:
        (draft,) = super().propose(context)
        source = "\n".join(ln for ln in draft.source.splitlines() if not ln.startswith("SEED"))
        return [Draft(source, draft.platform, draft.agent, draft.note, parents=draft.parents)]


def test_a_step_whose_drafts_another_lineage_evaluated_is_free():
    evaluations = Threaded(2)
    agent = Same("same", sleep=0.02)
    search = _search([agent, agent], evaluations, generations=3)
    result = search.run()
    # each step of the two lineages proposes what the other does: one evaluates it and the
    # other's step waits for that result, free; so each lineage still evaluates 3 drafts
    sources = [request.source for _, request in evaluations.submitted]
    assert len(sources) == len(set(sources)) == 6
    for lin in search.lineages:
        assert search.spent(lin) == 3 and 3 <= lin.generation <= 6
    assert result.stop == "generations"
    # the free steps are capped at `generations`: an agent with nothing new ends its lineage
    stuck = Threaded(2)

    class Stuck(Agent):
        def propose(self, context) -> list[Draft]:
            return [Draft("NAME = 'x'\nSTEP = 0\nMS = 1.0\nSLEEP = 0.0\nOK = True\n",
                          context.platform.name, "stuck", "fake")]  # fmt: skip

    search = _search([Stuck("stuck"), Stuck("stuck")], stuck, generations=2)
    search.run()
    assert len(stuck.submitted) == 1
    assert all(lin.generation <= 4 for lin in search.lineages)
