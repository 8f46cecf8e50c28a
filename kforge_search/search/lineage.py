"""A lineage: one chain of candidates for a (problem, platform), grown a step at a time.

Each step asks the lineage's agent for drafts, given every draft the lineage has evaluated
(with its result) and the references offered to it, evaluates the drafts it has not seen
before (by normalized source), and turns the results into population `Member`s with parent
links. Until one of its candidates verifies a lineage is in its functional pass; after that
its steps are optimization passes. No Ray here: the lineage actor (actors/) wraps this class
and passes in an `evaluate` that goes to the evaluator pool.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kforge_search.agents.base import Agent, Context, Draft, Parent, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.llm.calls import LLMCall, recording
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.population import Member, verified

Evaluate = Callable[[str], EvalResult]  # a candidate's source -> its evaluation

FUNCTIONAL, OPTIMIZATION = "functional", "optimization"


@dataclass(frozen=True)
class Step:
    """What one step of a lineage did."""

    generation: int
    pass_kind: str  # FUNCTIONAL or OPTIMIZATION: the lineage's state when the step began
    members: tuple[Member, ...]  # the candidates it evaluated, in order
    drafts: tuple[Draft, ...]  # their drafts, same order
    results: tuple[EvalResult, ...]  # their evaluations, same order
    proposed: int = 0  # drafts the agent returned (step() fills it in)
    repeats: int = 0  # of those, sources the lineage had already evaluated (not evaluated again)
    reused: tuple[bool, ...] = ()  # per member: its result came from another lineage's run
    calls: tuple[Draft, ...] = ()  # every LLM-written draft proposed, repeats included (a
    # repeat is not evaluated again, but its call was made; its analysis is recorded)
    llm_calls: tuple[LLMCall, ...] = ()  # every LLM call of the step, ok or failed: the
    # calls to charge and record
    agent_error: str = ""  # the agent raised ("Type: message"): the lineage retires

    @property
    def failure(self) -> str:
        """Why the step has no draft when the agent raised or its LLM calls failed ("" when
        it has drafts)."""
        if self.agent_error:
            return f"no draft: the agent raised {self.agent_error}"
        failed = [c for c in self.llm_calls if not c.ok]
        if self.members or not failed:
            return ""
        return f"no draft: LLM {failed[-1].role} call {failed[-1].summary}"


@dataclass(frozen=True)
class Proposal:
    drafts: tuple[Draft, ...]  # new to the lineage, at most the budget
    proposed: int  # drafts the agent returned, repeats included
    calls: tuple[Draft, ...] = ()  # the returned drafts an LLM call wrote, repeats included
    llm_calls: tuple[LLMCall, ...] = ()  # the LLM calls the agent made, ok or failed
    agent_error: str = ""  # the agent raised ("Type: message") instead of answering

    def counted(self, step: Step) -> Step:
        """The step that recorded this proposal, with what was proposed and repeated."""
        return dataclasses.replace(
            step,
            proposed=self.proposed,
            repeats=self.proposed - len(self.drafts),
            calls=self.calls,
            llm_calls=self.llm_calls,
            agent_error=self.agent_error,
        )


class Lineage:
    def __init__(
        self,
        lineage_id: str,
        problem: Problem,
        platform: Platform,
        agent: Agent,
        policy: str = "strict",
        seed: int = 0,
    ):
        if not lineage_id:
            raise ValueError("a lineage needs an id")
        self.lineage_id = lineage_id
        self.problem, self.platform, self.agent = problem, platform, agent
        self.policy, self.seed = policy, seed
        self.generation = 0
        self.parents: list[Parent] = []  # every evaluated draft, as the agent sees them
        self.members: list[Member] = []  # the same, as selection sees them
        self._candidate_of: dict[str, str] = {}  # draft id (source hash) -> candidate id
        self.pending: list[Draft] = []  # drafts to evaluate before the agent is asked

    def start_from(self, drafts: Sequence[Draft]) -> None:
        """Start from these drafts (e.g. the best kernels of another platform or device):
        the next steps evaluate them first, and the agent builds on what verifies."""
        self.pending.extend(drafts)

    @property
    def pass_kind(self) -> str:
        return OPTIMIZATION if any(m.verified for m in self.members) else FUNCTIONAL

    def best(self) -> Member | None:
        """The lineage's best verified member, if any."""
        ranked = verified(self.members)
        return ranked[0] if ranked else None

    def adopt(self, draft: Draft, result: EvalResult) -> Member:
        """Take in an evaluated draft from elsewhere (a fork's starting point, a resumed
        run) as if this lineage had evaluated it."""
        return self._record(draft, result)

    def propose(
        self, budget: int, references: Sequence[Reference] = (), remaining: int | None = None
    ) -> Proposal:
        """Up to `budget` drafts the lineage has not evaluated yet (the agent's answer to
        every draft it evaluated, with its result, and the references offered); `remaining`:
        the evaluations the search has left for this lineage, told to the agent."""
        if budget < 1:
            raise ValueError(f"budget={budget}: a step needs at least one evaluation")
        if self.pending:
            fresh = [d for d in self.pending if d.id not in self._candidate_of][:budget]
            self.pending = [d for d in self.pending if d not in fresh]
            if fresh:
                return Proposal(tuple(fresh), len(fresh))
        context = Context(
            self.problem,
            self.platform,
            self.policy,
            tuple(self.parents),
            tuple(references),
            budget,
            seed=_step_seed(self.lineage_id, self.seed, self.generation),
            remaining=None if remaining is None else max(remaining, budget),
        )
        with recording() as llm_calls:
            try:
                proposed = self.agent.propose(context)
            except Exception as exc:  # a bug of the agent's: this lineage ends, others go on
                error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                return Proposal((), 0, (), tuple(llm_calls), agent_error=error)
        fresh: list[Draft] = []
        for draft in proposed:
            if draft.id not in self._candidate_of and all(d.id != draft.id for d in fresh):
                fresh.append(draft)
        calls = tuple(d for d in proposed if d.model)
        return Proposal(tuple(fresh[:budget]), len(proposed), calls, tuple(llm_calls))

    def record(self, drafts: Sequence[Draft], results: Sequence[EvalResult]) -> Step:
        """Take in the results of a proposal's drafts (same order): one step done."""
        if len(drafts) != len(results):
            raise ValueError(f"{len(drafts)} drafts but {len(results)} results")
        kind = self.pass_kind
        members = tuple(self._record(d, r) for d, r in zip(drafts, results, strict=True))
        step = Step(self.generation, kind, members, tuple(drafts), tuple(results))
        self.generation += 1
        return step

    def step(self, evaluate: Evaluate, budget: int, references: Sequence[Reference] = ()) -> Step:
        """Propose, evaluate the new drafts one by one, record."""
        proposal = self.propose(budget, references)
        step = self.record(proposal.drafts, [evaluate(d.source) for d in proposal.drafts])
        return proposal.counted(step)

    def _record(self, draft: Draft, result: EvalResult) -> Member:
        parents = tuple(self._candidate_of[p] for p in draft.parents if p in self._candidate_of)
        member = Member.from_result(
            result,
            draft.source,
            lineage_id=self.lineage_id,
            parent_ids=parents,
            generation=self.generation,
        )
        self._candidate_of[draft.id] = member.candidate_id
        self.parents.append(Parent(draft, result))
        self.members.append(member)
        return member


def _step_seed(lineage_id: str, seed: int, generation: int) -> int:
    """A seed per (lineage, step): lineages explore differently, reruns repeat."""
    digest = hashlib.sha256(f"{lineage_id}:{seed}:{generation}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
