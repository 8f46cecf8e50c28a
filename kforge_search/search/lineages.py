"""Lineages: which to fork and which to retire after a generation.

A lineage is a chain of candidates descending from one root (`Member.lineage_id`). After
each generation the search forks its strongest lineages (a new lineage starts from their
best member) and retires its weakest (no more children), within bounds on how many stay
alive. Pure functions over scores; the loop that applies the plan comes later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kforge_search.search.population import Member


@dataclass(frozen=True)
class LineagePlan:
    """What to do with the lineages judged: `retire` and `keep` split them, best first;
    `fork` is a part of `keep`."""

    fork: tuple[str, ...]  # strong: also start a new lineage from its best member
    retire: tuple[str, ...]  # weak: no more children
    keep: tuple[str, ...]  # go on (forks included)


def lineage_scores(members: Iterable[Member]) -> dict[str, float | None]:
    """Each lineage's best verified fitness; None for a lineage with no verified member."""
    scores: dict[str, float | None] = {}
    for m in members:
        best = scores.setdefault(m.lineage_id, None)
        if m.verified and (best is None or m.fitness > best):
            scores[m.lineage_id] = m.fitness
    return scores


def _order(item: tuple[str, float | None]) -> tuple[bool, float, str]:
    lineage, score = item
    return (score is None, -(score or 0.0), lineage)


def plan_lineages(
    scores: Mapping[str, float | None],
    *,
    fork: int = 1,
    retire: int = 1,
    min_alive: int = 2,
    max_alive: int = 8,
) -> LineagePlan:
    """Fork up to `fork` of the best verified lineages and retire up to `retire` of the
    worst, where a lineage is retired only if it scores below the best (or has no verified
    member), at least `min_alive` lineages stay, and the forks add no more than `max_alive`
    allows. Pass only lineages old enough to be judged. Ties go by lineage id."""
    if fork < 0 or retire < 0 or min_alive < 1 or max_alive < min_alive:
        raise ValueError(
            f"fork={fork}, retire={retire}, min_alive={min_alive}, max_alive={max_alive}: "
            "need fork >= 0, retire >= 0 and 1 <= min_alive <= max_alive"
        )
    ranked = sorted(scores.items(), key=_order)
    scored = [score for _, score in ranked if score is not None]
    top = scored[0] if scored else None
    weak = [
        lineage
        for lineage, score in reversed(ranked)
        if score is None or (top is not None and score < top)
    ]
    retired = weak[: max(0, min(retire, len(ranked) - min_alive))]
    alive = len(ranked) - len(retired)
    strong = [lineage for lineage, score in ranked if score is not None and lineage not in retired]
    forks = strong[: max(0, min(fork, max_alive - alive))]
    keep = [lineage for lineage, _ in ranked if lineage not in retired]
    return LineagePlan(tuple(forks), tuple(retired), tuple(keep))
