"""The interface every agent shares, LLM or not: `propose(context) -> list[Draft]`.

The search engine builds a Context (the problem, the platform, the numeric policy, parents
with their evaluation results and profile digests, retrieved references and the budget
left) and asks an agent for drafts: candidate sources to evaluate. An agent says up front
whether it can handle a problem at all (`supports`), so "cannot express this" is a typed
answer and not an empty list.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kforge_search.evaluator.policy import get_policy
from kforge_search.platforms import Platform
from kforge_search.problem import Problem, source_hash

if TYPE_CHECKING:
    from kforge_search.agents.builtin.genome import Genome
    from kforge_search.analysis.rules import Analysis
    from kforge_search.evaluator.result import EvalResult

# Held for agent work that is not thread-safe (torch.fx tracing, the rules' figures): the
# lineages of a generation propose side by side, and only an agent's waiting (an LLM call)
# overlaps with another's work.
SERIAL = threading.RLock()


@dataclass(frozen=True)
class Draft:
    """A candidate source an agent proposes, with what it is and where it came from."""

    source: str
    platform: str
    agent: str
    note: str  # what it does, and what changed from its parents
    genome: Genome | None = None  # the tunables, for agents that search over them
    precision: str = ""  # the GEMM input precision: ieee, tf32x3, tf32, bf16
    parents: tuple[str, ...] = ()  # ids of the drafts it derives from
    model: str = ""  # the LLM that wrote it ("" for the builtin agent)
    tokens_in: int = 0  # what writing it cost: prompt and completion tokens, dollars
    tokens_out: int = 0
    cost_usd: float = 0.0
    analysis: Analysis | None = None  # the analysis of parents[0] this draft was written
    # from, when it was made for this draft (an analysis is attached to one proposal only)

    @property
    def id(self) -> str:
        return source_hash(self.source)


@dataclass(frozen=True)
class Parent:
    """An evaluated draft the next proposal may build on."""

    draft: Draft
    result: EvalResult
    profile: str = ""  # a profile digest (hot kernels, bound, occupancy) when one was taken

    @property
    def p50_ms(self) -> float | None:
        timing = self.result.timing
        return timing.p50_ms if self.result.ok and timing else None


@dataclass(frozen=True)
class Reference:
    """A retrieved example: a verified kernel of this or a similar problem."""

    source: str
    problem_name: str
    platform: str
    speedup: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Context:
    problem: Problem
    platform: Platform
    policy: str = "strict"
    parents: tuple[Parent, ...] = ()
    references: tuple[Reference, ...] = ()
    budget: int = 1  # evaluations this step: an agent proposes at most this many drafts
    seed: int = 0
    remaining: int | None = None  # evaluations the search has left for this lineage, this
    # step's included (its generations, its functional passes, the candidate budget); None:
    # not known

    def __post_init__(self) -> None:
        get_policy(self.policy)
        if self.budget < 0:
            raise ValueError(f"budget={self.budget}: needs >= 0 evaluations left")
        if self.remaining is not None and self.remaining < self.budget:
            raise ValueError(
                f"remaining={self.remaining} < budget={self.budget}: what is left includes "
                "this step"
            )

    @property
    def left(self) -> int:
        """The evaluations left to tell a model (this step's when nothing more is known)."""
        return self.budget if self.remaining is None else self.remaining


@dataclass(frozen=True)
class Support:
    ok: bool
    reason: str = ""  # why not, as "unsupported: <op> (...)"


class Agent(Protocol):
    """`concurrent = True` on an agent class: its `propose` may run in several threads at
    once (it takes SERIAL for work that may not); otherwise proposals hold SERIAL."""

    name: str

    def supports(self, problem: Problem, platform: Platform) -> Support:
        """Whether this agent can write a kernel for the problem on the platform at all."""
        ...

    def propose(self, context: Context) -> list[Draft]:
        """Up to `context.budget` drafts (none when the budget is spent or unsupported)."""
        ...
