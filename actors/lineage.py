"""Lineages as Ray actors: `LineageActor` holds a `search.lineage.Lineage` (and its agent)
in its own process, `RemoteLineage` is the driver's stand-in with the same interface.

The agent's work (tracing and templates for the builtin agent; the LLM calls of issue 7)
runs in the actor, never in the driver or on a GPU evaluator. Lineage actors ask for no CPU
(`num_cpus=0`): they mostly wait, so they never starve the evaluator pools of the slots the
cluster has. Crashed actors are restarted by Ray; a restarted actor has lost its lineage, so
`RemoteLineage` replays what it mirrors (every evaluated draft with its result) into the new
one before the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray

from kforge_search.agents.base import Agent, Draft, Parent, Reference
from kforge_search.evaluator.result import EvalResult
from kforge_search.platforms import Platform
from kforge_search.problem import Problem
from kforge_search.search.lineage import Lineage, Proposal, Step
from kforge_search.search.population import Member, verified


@ray.remote(num_cpus=0, max_restarts=2, max_task_retries=0)
class LineageActor:
    def __init__(self, lineage_id: str, problem: Problem, platform: Platform, agent: Agent,
                 policy: str, seed: int):  # fmt: skip
        self.lineage = Lineage(lineage_id, problem, platform, agent, policy, seed)

    def size(self) -> int:
        return len(self.lineage.members)

    def restore(self, parents: Sequence[Parent], pending: Sequence[Draft], generation: int) -> None:
        for p in parents:
            self.lineage.adopt(p.draft, p.result)
        self.lineage.pending = list(pending)
        self.lineage.generation = generation

    def start_from(self, drafts: Sequence[Draft]) -> None:
        self.lineage.start_from(drafts)

    def propose(
        self, budget: int, references: Sequence[Reference], remaining: int | None = None
    ) -> Proposal:
        return self.lineage.propose(budget, references, remaining)

    def record(self, drafts: Sequence[Draft], results: Sequence[EvalResult]) -> Step:
        return self.lineage.record(drafts, results)

    def adopt(self, draft: Draft, result: EvalResult, generation: int) -> Member:
        self.lineage.generation = generation
        return self.lineage.adopt(draft, result)

    def set_generation(self, generation: int) -> None:
        self.lineage.generation = generation


class RemoteLineage:
    """The driver's view of a lineage that lives in a `LineageActor`: the same interface as
    `Lineage` (propose, record, adopt, best, members, parents, generation)."""

    remote = True

    def __init__(self, lineage_id: str, problem: Problem, platform: Platform, agent: Agent,
                 policy: str = "strict", seed: int = 0):  # fmt: skip
        self.lineage_id, self.problem, self.platform = lineage_id, problem, platform
        self.policy, self.seed = policy, seed
        self._args = (lineage_id, problem, platform, agent, policy, seed)
        self.actor = LineageActor.remote(*self._args)
        self.members: list[Member] = []
        self.parents: list[Parent] = []
        self.pending: list[Draft] = []
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    @generation.setter
    def generation(self, value: int) -> None:
        self._generation = value
        self._call("set_generation", value)

    @property
    def pass_kind(self) -> str:
        return "optimization" if any(m.verified for m in self.members) else "functional"

    def best(self) -> Member | None:
        ranked = verified(self.members)
        return ranked[0] if ranked else None

    def start_from(self, drafts: Sequence[Draft]) -> None:
        self.pending.extend(drafts)
        self._call("start_from", list(drafts))

    def propose(
        self, budget: int, references: Sequence[Reference] = (), remaining: int | None = None
    ) -> Proposal:
        proposal = self._call("propose", budget, list(references), remaining)
        self.pending = [d for d in self.pending if d not in proposal.drafts]
        return proposal

    def record(self, drafts: Sequence[Draft], results: Sequence[EvalResult]) -> Step:
        step = self._call("record", list(drafts), list(results))
        self.members.extend(step.members)
        self.parents.extend(Parent(d, r) for d, r in zip(drafts, results, strict=True))
        self._generation += 1
        return step

    def adopt(self, draft: Draft, result: EvalResult) -> Member:
        member = self._call("adopt", draft, result, self._generation)
        self.members.append(member)
        self.parents.append(Parent(draft, result))
        return member

    def _call(self, method: str, *args: Any) -> Any:
        """One call; if the actor was restarted (its lineage lost), replay it first."""
        try:
            if ray.get(self.actor.size.remote()) != len(self.members):
                ray.get(self.actor.restore.remote(self.parents, self.pending, self._generation))
        except ray.exceptions.RayActorError:  # gone for good: a fresh actor, replayed
            self.actor = LineageActor.remote(*self._args)
            ray.get(self.actor.restore.remote(self.parents, self.pending, self._generation))
        return ray.get(getattr(self.actor, method).remote(*args))

    def close(self) -> None:
        ray.kill(self.actor)
