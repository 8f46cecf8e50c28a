"""The search loop: lineages per (problem, platform), grown without a generation barrier.

Steady-state evolution: a lineage proposes its next draft as soon as its last result is in
(search/steps.py), while other lineages' steps are still proposing or evaluating. Each
platform keeps `in_flight_per_evaluator` steps in flight per evaluator (its `Evaluations`:
a Ray evaluator pool in a search, an in-process `evaluate_many` otherwise), the least
advanced idle lineage first, so the evaluators always have the next draft queued and the
proposals are made from the latest results. Each step is charged to the budget
(evaluations, every LLM call) and reported as soon as its results are in; each agent is
told the evaluations the search has left for its lineage. Selection reads the population as
results arrive: each time the lineages of a (problem, platform) have together taken as many
new steps as the group has live lineages (a generation's worth), the group is judged: the
strongest fork (a new lineage starts from its best member; a lineage with a step in flight
forks when its result is in), the weakest retire (`lineages.plan_lineages`; a retired
lineage's step in flight is still recorded, it proposes no more). Every lineage is offered
the best verified kernels of the same problem here and on the other platforms as references
(live cross-platform transfer). `generations` is each lineage's number of steps (a fork
goes on from its parent's count). The budget is checked before each step, and the search
stops with the reason once the steps in flight are in. A lineage that has no verified
kernel after its functional-pass budget (`functional_passes` steps) gives up and retires;
one whose agent raised retires. No Ray here (actors/ and the CLI bring it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kforge_search.agents.base import Agent, Draft, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.budget import Budget, BudgetTracker, Exhausted, StopReason
from kforge_search.search.evaluations import EvaluateMany, Evaluations, as_evaluations
from kforge_search.search.lineage import FUNCTIONAL, Lineage, Step
from kforge_search.search.lineages import lineage_scores, plan_lineages
from kforge_search.search.population import Member, references_for, verified
from kforge_search.search.steps import MAX_PROPOSING, Stepper


@dataclass(frozen=True)
class SearchConfig:
    lineages: int = 2  # per (problem, platform) at the start
    generations: int = 3  # steps (evaluation rounds) per lineage; a fork goes on from its
    # parent's count; a step that evaluates nothing new (Search.spent) is not counted
    drafts_per_step: int = 1  # evaluations a lineage asks for per step
    policy: str = "strict"
    seed: int = 0
    fork: int = 1  # lineages forked per (problem, platform) and judgement
    retire: int = 1  # lineages retired likewise
    min_alive: int = 1
    max_alive: int = 4
    judge_after: int = 1  # steps a lineage takes before it can be forked or retired
    functional_passes: int = 5  # steps a lineage may take to a verified kernel, else it gives up
    in_flight_per_evaluator: int = 2  # steps in flight (proposing or evaluating) per
    # evaluator of a platform: the next draft is queued when one ends. Raise it for LLM
    # agents, whose proposals take longer than an evaluation

    def __post_init__(self) -> None:
        for name in (
            "lineages",
            "generations",
            "drafts_per_step",
            "max_alive",
            "functional_passes",
            "in_flight_per_evaluator",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: needs >= 1")


@dataclass(frozen=True)
class SearchResult:
    generations: int  # the most steps any lineage took (a fork counts its parent's; free
    # steps too)
    stop: str  # why it stopped: "generations" or the budget's message
    best: dict[tuple[str, str], Member]  # (problem id, platform) -> best verified member
    members: tuple[Member, ...]
    retired: tuple[str, ...] = field(default=())
    forked: tuple[str, ...] = field(default=())
    gave_up: tuple[str, ...] = field(default=())  # retired: no verified kernel in their
    # functional-pass budget
    agent_errors: tuple[tuple[str, str], ...] = field(default=())  # (lineage id, error):
    # retired, their agent raised


OnStep = Callable[[Lineage, Step], None]
Group = tuple[str, str]  # (problem id, platform name)


def _group(lineage: Lineage) -> Group:
    return lineage.problem.id, lineage.platform.name


class Search:
    def __init__(
        self,
        problems: Sequence[Problem],
        platforms: Sequence[Platform],
        agent: Agent | Sequence[Agent],
        evaluate_many: Mapping[str, EvaluateMany | Evaluations],
        config: SearchConfig,
        budget: Budget,
        on_step: OnStep | None = None,
        seeds: Mapping[tuple[str, str], Sequence[Draft]] | None = None,
        references: Mapping[str, Sequence[Reference]] | None = None,
        make_lineage: Callable[..., Lineage] = Lineage,
    ):
        """`evaluate_many`: per platform name, its `Evaluations` (e.g.
        actors.pool.PoolEvaluations) or a blocking `evaluate_many` (evaluated in batches,
        `evaluations.Batched`); `seeds`: drafts each new lineage of (problem id, platform)
        evaluates first; `references`: kernels offered to every lineage of a problem id
        (e.g. another platform's best from the database) besides the search's own live
        ones; `make_lineage`: Lineage's signature, e.g. actors.lineage.RemoteLineage (a
        lineage in its own actor process)."""
        missing = [p.name for p in platforms if p.name not in evaluate_many]
        if missing:
            raise ValueError(f"no evaluator for platform(s) {missing}")
        # several agents: lineage n of each (problem, platform) gets agents[n % len(agents)]
        # (e.g. a builtin seed lineage beside LLM lineages); a fork keeps its parent's
        self.agents: tuple[Agent, ...] = (
            tuple(agent) if isinstance(agent, list | tuple) else (agent,)  # type: ignore[arg-type]
        )
        self.problems, self.platforms = problems, platforms
        self.evaluations = {name: as_evaluations(e) for name, e in evaluate_many.items()}
        self.config = config
        self.tracker = BudgetTracker(budget)
        self.on_step = on_step
        self.make_lineage = make_lineage
        self.agent_of: dict[str, Agent] = {}
        self.seeds = dict(seeds or {})
        self.given_refs = dict(references or {})
        self.alive: list[Lineage] = [
            self._lineage(problem, platform, i)
            for problem in problems
            for platform in platforms
            for i in range(config.lineages)
        ]
        self.retired: list[Lineage] = []
        self.forked: list[str] = []
        self.gave_up: list[str] = []
        self.agent_errors: list[tuple[str, str]] = []  # (lineage id, what its agent raised)
        self.known: dict[str, EvalResult] = {}  # every result, by steps.result_key
        self.stepper = Stepper(self.evaluations, self.known, self._stepped, MAX_PROPOSING)
        self._since_judged: dict[Group, int] = {}  # steps recorded since the group's judgement
        self._fork_due: set[str] = set()  # judged to fork while a step was in flight
        self._started: dict[str, int] = {}  # lineage id -> when its last step started
        self._starts = 0  # steps started
        self._free: dict[str, int] = {}  # lineage id -> its steps that evaluated nothing
        self._refused = ""  # why the last step the budget refused was refused

    def _lineage(
        self, problem: Problem, platform: Platform, n: int, agent: Agent | None = None
    ) -> Lineage:
        lineage_id = f"{problem.name}@{platform.name}#{n}"
        agent = agent if agent is not None else self.agents[n % len(self.agents)]
        # the search's seed reaches every lineage's steps (seed 0: lineage n's seed is n)
        seed = self.config.seed * 100_003 + n
        lineage = self.make_lineage(lineage_id, problem, platform, agent, self.config.policy, seed)
        self.agent_of[lineage_id] = agent
        lineage.start_from(self.seeds.get((problem.id, platform.name), ()))
        return lineage

    @property
    def lineages(self) -> list[Lineage]:
        return self.alive + self.retired

    def members(self) -> list[Member]:
        return [m for lineage in self.lineages for m in lineage.members]

    def run(self) -> SearchResult:
        with self.stepper:
            self._fill()
            while self.stepper.active:
                self.stepper.wait()
                self._fill()
        best: dict[tuple[str, str], Member] = {}
        for m in verified(self.members()):
            best.setdefault((m.problem_id, m.platform), m)
        return SearchResult(
            max((lin.generation for lin in self.lineages), default=0),
            self._refused or "generations",
            best,
            tuple(self.members()),
            tuple(lin.lineage_id for lin in self.retired),
            tuple(self.forked),
            tuple(self.gave_up),
            tuple(self.agent_errors),
        )

    def _fill(self) -> None:
        """Start steps while a platform has room in flight and the budget allows."""
        self._refused = ""
        while (lineage := self._next()) is not None:
            if refused := self._budget_refuses():
                self._refused = refused
                return
            self._starts += 1
            self._started[lineage.lineage_id] = self._starts
            self.stepper.start(
                lineage,
                self.config.drafts_per_step,
                self._references(lineage),
                self._remaining(lineage),
            )

    def _next(self) -> Lineage | None:
        """The live, idle lineage with steps left on a platform with room: the least
        advanced first, then the one that started its last step longest ago."""
        cfg = self.config
        room = {
            name: e.capacity * cfg.in_flight_per_evaluator - self.stepper.in_flight(name)
            for name, e in self.evaluations.items()
        }
        ready = [
            lin
            for lin in self.alive
            if room[lin.platform.name] > 0
            and self.spent(lin) < cfg.generations
            and not self.stepper.busy(lin)
        ]
        return min(
            ready,
            key=lambda lin: (self.spent(lin), self._started.get(lin.lineage_id, -1)),
            default=None,
        )

    def _held(self) -> int:
        """Evaluations the steps in flight may still run (a proposal in writing may ask for
        `drafts_per_step`)."""
        return self.stepper.evaluating + self.stepper.proposing * self.config.drafts_per_step

    def _budget_refuses(self) -> str:
        """Why the budget allows no further step ("" when it does)."""
        if (out := self.tracker.exhausted()) is not None:
            return out.message
        most = self.tracker.budget.max_candidates
        used, ask = self.tracker.usage().candidates, self.config.drafts_per_step
        if most is not None and used + self._held() + ask > most:
            message = Exhausted(StopReason.CANDIDATES, used, most).message
            return message if used >= most else f"{message} (a step asks for {ask})"
        return ""

    def spent(self, lineage: Lineage) -> int:
        """The lineage's steps that count against `generations`: a step whose every draft
        the search had evaluated, or was evaluating, for another lineage is free, up to
        `generations` of them. The builtin agent's first steps (the seed, then its fixed
        tuning steps) are the same in every lineage of a problem: without this a second
        lineage spent its steps on the first one's results (H200, `bench --throughput`:
        35 of 85 steps)."""
        return lineage.generation - self._free.get(lineage.lineage_id, 0)

    def _stepped(self, lineage: Lineage, step: Step) -> None:
        """One lineage's step is in (others may still be proposing or evaluating)."""
        self.tracker.add_candidates(step.reused.count(False))
        free = self._free.get(lineage.lineage_id, 0)
        if step.drafts and all(step.reused) and free < self.config.generations:
            self._free[lineage.lineage_id] = free + 1
        for call in step.llm_calls:  # every LLM call of the step, failed ones too
            self.tracker.add_llm(call.tokens_in + call.tokens_out, call.cost_usd)
        if self.on_step is not None:
            self.on_step(lineage, step)
        cfg = self.config
        alive = lineage in self.alive  # a retired lineage's last step is recorded, no more
        if step.agent_error:  # the agent raised: asking it again would raise again
            self.agent_errors.append((lineage.lineage_id, step.agent_error))
            self._retire(lineage)
        elif (
            alive
            and lineage.pass_kind == FUNCTIONAL
            and self.spent(lineage) >= cfg.functional_passes
        ):
            self._retire(lineage)  # its functional-pass budget is spent
            self.gave_up.append(lineage.lineage_id)
        if lineage.lineage_id in self._fork_due:  # judged strong while its step was out
            self._fork_due.discard(lineage.lineage_id)
            group = [lin for lin in self.alive if _group(lin) == _group(lineage)]
            room = len(group) < cfg.max_alive and self.spent(lineage) < cfg.generations
            if lineage in self.alive and room:
                self.alive.append(self._fork(lineage))
        key = _group(lineage)
        self._since_judged[key] = self._since_judged.get(key, 0) + 1
        live = sum(1 for lin in self.alive if _group(lin) == key)
        if self._since_judged[key] >= max(1, live):  # a generation's worth of new steps
            self._since_judged[key] = 0
            self._judge(key)

    def _retire(self, lineage: Lineage) -> None:
        if lineage in self.alive:
            self.alive.remove(lineage)
            self.retired.append(lineage)
        self._fork_due.discard(lineage.lineage_id)

    def _remaining(self, lineage: Lineage) -> int:
        """The evaluations the search has left for a lineage: its steps (its functional
        passes, before it verifies), within the candidate budget."""
        cfg = self.config
        steps = cfg.generations - self.spent(lineage)
        if lineage.pass_kind == FUNCTIONAL:
            steps = min(steps, cfg.functional_passes - self.spent(lineage))
        left = steps * cfg.drafts_per_step
        if (most := self.tracker.budget.max_candidates) is not None:
            left = min(left, most - self.tracker.usage().candidates - self._held())
        return max(1, left)

    def _references(self, lineage: Lineage) -> tuple[Reference, ...]:
        """The best verified kernel of this problem on each other platform."""
        sources = {
            lin.members[i].candidate_id: p.draft.source
            for lin in self.lineages
            if lin.problem.id == lineage.problem.id
            for i, p in enumerate(lin.parents)
        }
        same_problem = [m for m in self.members() if m.problem_id == lineage.problem.id]
        live = tuple(
            Reference(sources[m.candidate_id], lineage.problem.name, m.platform, m.speedup)
            for m in references_for(same_problem, lineage.platform.name)
        )
        own = {m.candidate_id for m in lineage.members}
        here = verified(
            m
            for m in same_problem
            if m.platform == lineage.platform.name and m.candidate_id not in own
        )
        if here:  # the best kernel another lineage found here (e.g. a builtin seed's)
            m = here[0]
            note = f"the best kernel of another lineage on {m.platform}"
            live = (
                Reference(
                    sources[m.candidate_id], lineage.problem.name, m.platform, m.speedup, note
                ),
                *live,
            )
        return live + tuple(self.given_refs.get(lineage.problem.id, ()))

    def _judge(self, key: Group) -> None:
        """Fork the strongest and retire the weakest lineages of one (problem, platform)
        that are old enough; a lineage with a step in flight forks when it is in."""
        cfg = self.config
        group = [
            lin for lin in self.alive if _group(lin) == key and lin.generation >= cfg.judge_after
        ]
        if not group:
            return
        by_id = {lin.lineage_id: lin for lin in group}
        scores = lineage_scores(m for lin in group for m in lin.members)
        plan = plan_lineages(
            scores,
            fork=cfg.fork,
            retire=cfg.retire,
            min_alive=cfg.min_alive,
            max_alive=cfg.max_alive,
        )
        for lineage_id in plan.retire:
            self._retire(by_id[lineage_id])
        for lineage_id in plan.fork:
            if self.spent(by_id[lineage_id]) >= cfg.generations:
                continue  # its fork would have no step left
            if self.stepper.busy(by_id[lineage_id]):
                self._fork_due.add(lineage_id)
            else:
                self.alive.append(self._fork(by_id[lineage_id]))

    def _fork(self, parent: Lineage) -> Lineage:
        """A new lineage that starts from `parent`'s best member (adopted, not evaluated
        again)."""
        n = sum(1 for lin in self.lineages if lin.problem.id == parent.problem.id)
        child = self._lineage(parent.problem, parent.platform, n, self.agent_of[parent.lineage_id])
        best = parent.best()
        assert best is not None  # plan_lineages forks verified lineages only
        index = next(i for i, m in enumerate(parent.members) if m is best)
        found = parent.parents[index]
        child.generation = best.generation  # the adopted member keeps its generation
        child.adopt(found.draft, found.result)
        child.generation = parent.generation  # and the child goes on from the parent's
        self._free[child.lineage_id] = self._free.get(parent.lineage_id, 0)
        self.forked.append(child.lineage_id)
        return child
