"""The search loop: lineages per (problem, platform), grown a generation at a time.

Each generation every live lineage proposes (LLM lineages side by side) and the drafts of a
platform are evaluated as the proposals arrive (its `evaluate_many`: a Ray evaluator pool in
a search; generation.py), each lineage's step charged to the budget (evaluations, every LLM
call) and reported as soon as its results are in. Each agent is told the evaluations the
search has left for its lineage. Between generations the
lineages of each (problem, platform) are judged: the strongest fork (a new lineage starts
from its best member), the weakest retire (`lineages.plan_lineages`). Every lineage is
offered the best verified kernels of the same problem on the other platforms as references
(live cross-platform transfer). The budget is checked before each generation, and the
search stops with the reason. A lineage that has no verified kernel after its functional-pass
budget (`functional_passes` steps) gives up and retires. No Ray here (actors/ and the CLI
bring it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kforge_search.agents.base import Agent, Draft, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.budget import Budget, BudgetTracker
from kforge_search.search.generation import EvaluateMany, run_generation
from kforge_search.search.lineage import FUNCTIONAL, Lineage, Step
from kforge_search.search.lineages import lineage_scores, plan_lineages
from kforge_search.search.population import Member, references_for, verified


@dataclass(frozen=True)
class SearchConfig:
    lineages: int = 2  # per (problem, platform) at the start
    generations: int = 3
    drafts_per_step: int = 1  # evaluations a lineage asks for per generation
    policy: str = "strict"
    seed: int = 0
    fork: int = 1  # lineages forked per (problem, platform) and generation
    retire: int = 1  # lineages retired likewise
    min_alive: int = 1
    max_alive: int = 4
    judge_after: int = 1  # generations a lineage lives before it can be forked or retired
    functional_passes: int = 5  # steps a lineage may take to a verified kernel, else it gives up

    def __post_init__(self) -> None:
        for name in (
            "lineages",
            "generations",
            "drafts_per_step",
            "max_alive",
            "functional_passes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: needs >= 1")


@dataclass(frozen=True)
class SearchResult:
    generations: int  # generations run
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


class Search:
    def __init__(
        self,
        problems: Sequence[Problem],
        platforms: Sequence[Platform],
        agent: Agent | Sequence[Agent],
        evaluate_many: Mapping[str, EvaluateMany],
        config: SearchConfig,
        budget: Budget,
        on_step: OnStep | None = None,
        seeds: Mapping[tuple[str, str], Sequence[Draft]] | None = None,
        references: Mapping[str, Sequence[Reference]] | None = None,
        make_lineage: Callable[..., Lineage] = Lineage,
    ):
        """`seeds`: drafts each new lineage of (problem id, platform) evaluates first;
        `references`: kernels offered to every lineage of a problem id (e.g. another
        platform's best from the database) besides the search's own live ones;
        `make_lineage`: Lineage's signature, e.g. actors.lineage.RemoteLineage (a lineage in
        its own actor process)."""
        missing = [p.name for p in platforms if p.name not in evaluate_many]
        if missing:
            raise ValueError(f"no evaluator for platform(s) {missing}")
        # several agents: lineage n of each (problem, platform) gets agents[n % len(agents)]
        # (e.g. a builtin seed lineage beside LLM lineages); a fork keeps its parent's
        self.agents: tuple[Agent, ...] = (
            tuple(agent) if isinstance(agent, list | tuple) else (agent,)  # type: ignore[arg-type]
        )
        self.problems, self.platforms = problems, platforms
        self.evaluate_many, self.config = evaluate_many, config
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
        self.known: dict[str, EvalResult] = {}  # every result, by generation.result_key

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
        done, stop = 0, "generations"
        while done < self.config.generations:
            if (out := self.tracker.exhausted()) is not None:
                stop = out.message
                break
            self.generation(done)
            done += 1
        best: dict[tuple[str, str], Member] = {}
        for m in verified(self.members()):
            best.setdefault((m.problem_id, m.platform), m)
        return SearchResult(
            done,
            stop,
            best,
            tuple(self.members()),
            tuple(lin.lineage_id for lin in self.retired),
            tuple(self.forked),
            tuple(self.gave_up),
            tuple(self.agent_errors),
        )

    def generation(self, index: int) -> None:
        cfg = self.config
        left = self.tracker.budget.max_candidates
        for platform in self.platforms:
            group = [lin for lin in self.alive if lin.platform.name == platform.name]
            if left is not None:  # never propose past the candidate budget
                room = left - self.tracker.usage().candidates
                group = group[: max(0, room // cfg.drafts_per_step)]
            if not group:
                continue
            refs = {lin.lineage_id: self._references(lin) for lin in group}
            told = {lin.lineage_id: self._remaining(lin, index) for lin in group}
            run_generation(
                group,
                self.evaluate_many[platform.name],
                cfg.drafts_per_step,
                refs,
                self.known,
                remaining=told,
                on_step=self._stepped,
            )
        if index + 1 >= cfg.judge_after:
            self._judge()

    def _stepped(self, lineage: Lineage, step: Step) -> None:
        """One lineage's step is in (the others of its generation may still be running)."""
        self.tracker.add_candidates(step.reused.count(False))
        for call in step.llm_calls:  # every LLM call of the step, failed ones too
            self.tracker.add_llm(call.tokens_in + call.tokens_out, call.cost_usd)
        if self.on_step is not None:
            self.on_step(lineage, step)
        cfg = self.config
        if step.agent_error:  # the agent raised: asking it again would raise again
            self.alive.remove(lineage)
            self.retired.append(lineage)
            self.agent_errors.append((lineage.lineage_id, step.agent_error))
        elif lineage.pass_kind == FUNCTIONAL and lineage.generation >= cfg.functional_passes:
            self.alive.remove(lineage)  # its functional-pass budget is spent
            self.retired.append(lineage)
            self.gave_up.append(lineage.lineage_id)

    def _remaining(self, lineage: Lineage, index: int) -> int:
        """The evaluations the search has left for a lineage at generation `index`: its
        generations (its functional passes, before it verifies), within the candidate
        budget."""
        cfg = self.config
        steps = cfg.generations - index
        if lineage.pass_kind == FUNCTIONAL:
            steps = min(steps, cfg.functional_passes - lineage.generation)
        left = steps * cfg.drafts_per_step
        if (most := self.tracker.budget.max_candidates) is not None:
            left = min(left, most - self.tracker.usage().candidates)
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

    def _judge(self) -> None:
        cfg = self.config
        groups: dict[tuple[str, str], list[Lineage]] = {}
        for lin in self.alive:
            if lin.generation >= cfg.judge_after:
                groups.setdefault((lin.problem.id, lin.platform.name), []).append(lin)
        for group in groups.values():
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
                lin = by_id[lineage_id]
                self.alive.remove(lin)
                self.retired.append(lin)
            for lineage_id in plan.fork:
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
        self.forked.append(child.lineage_id)
        return child
