"""Winners: the best verified kernel of each (problem, platform), measured again before it is
reported.

A search keeps the fastest of many single measurements, so its winner is the kernel most
likely to have drawn a lucky one (selection bias). Each winner is evaluated once more by
the evaluator: a fresh child process, verification again (at the problem's unseen size set
too, where it has one) and a new timing. Both figures are reported and stored; a winner
whose second evaluation fails is reported as not confirmed, never silently kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kforge_search.agents.base import Draft
from kforge_search.evaluator.result import EvalResult
from kforge_search.problem import Problem
from kforge_search.search.generation import EvaluateMany, Request
from kforge_search.search.lineage import Lineage
from kforge_search.search.population import Member, verified


@dataclass(frozen=True)
class Winner:
    problem: Problem
    platform: str
    member: Member  # as the search measured it
    draft: Draft
    again: EvalResult  # the second, independent evaluation

    @property
    def measured_again(self) -> Member:
        return Member.from_result(
            self.again,
            self.draft.source,
            lineage_id=self.member.lineage_id,
            parent_ids=self.member.parent_ids,
            generation=self.member.generation,
        )

    @property
    def confirmed(self) -> bool:
        """Verified again (and at unseen sizes where the problem has them)."""
        return self.measured_again.verified


def best_of(lineages: Sequence[Lineage]) -> list[tuple[Lineage, Member, Draft]]:
    """The best verified member per (problem, platform), with its lineage and draft."""
    found: dict[tuple[str, str], tuple[Lineage, Member, Draft]] = {}
    for lineage in lineages:
        for member, parent in zip(lineage.members, lineage.parents, strict=True):
            if not member.verified:
                continue
            key = (member.problem_id, member.platform)
            held = found.get(key)
            if held is None or verified([held[1], member])[0] is member:
                found[key] = (lineage, member, parent.draft)
    return [found[k] for k in sorted(found)]


def remeasure(
    lineages: Sequence[Lineage], evaluate_many: Mapping[str, EvaluateMany]
) -> list[Winner]:
    """Each (problem, platform)'s best verified kernel, evaluated again."""
    picks = best_of(lineages)
    by_platform: dict[str, list[tuple[str, Lineage, Member, Draft]]] = {}
    for i, (lineage, member, draft) in enumerate(picks):
        by_platform.setdefault(member.platform, []).append((f"winner/{i}", lineage, member, draft))
    winners: list[Winner] = []
    for platform, items in by_platform.items():
        requests = [Request(key, draft.source, lin.problem) for key, lin, _, draft in items]
        results = dict(evaluate_many[platform](requests))
        for key, lineage, member, draft in items:
            winners.append(Winner(lineage.problem, platform, member, draft, results[key]))
    return sorted(winners, key=lambda w: (w.problem.name, w.platform))
