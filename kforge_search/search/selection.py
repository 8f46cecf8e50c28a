"""Choosing parents: elitism, tournament and rank selection, crossover pairs.

Pure functions over `Member`s of one island (one problem on one platform), with the
randomness passed in as a `random.Random`. Only verified members are ever chosen: a parent
that was never verified would teach the next generation a wrong or unchecked kernel. With
no verified member to choose from, the pickers raise `NoVerifiedMembers`; `elites` returns
an empty list (keeping nothing is a valid outcome of elitism).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from kforge_search.search.population import Member, dedupe, rank_key, verified

Method = Literal["tournament", "rank"]


class NoVerifiedMembers(ValueError):
    """Selection was asked for parents among members none of which is verified."""


def _island(members: Sequence[Member]) -> None:
    keys = {(m.problem_id, m.platform) for m in members}
    if len(keys) > 1:
        raise ValueError(
            f"selection happens within one island, but the members span {sorted(keys)} "
            "(problem, platform): split them with population.islands(...) first"
        )


def _pool(members: Sequence[Member], need: int = 1) -> list[Member]:
    """The distinct verified members, best first; raise when fewer than `need`."""
    _island(members)
    pool = verified(dedupe(members))
    if len(pool) < need:
        raise NoVerifiedMembers(
            f"need {need} verified parent(s), found {len(pool)} among {len(members)} "
            "members: evaluate more candidates (or start from a hand-written root) first"
        )
    return pool


def elites(members: Sequence[Member], k: int) -> list[Member]:
    """The top `k` distinct verified members, best first (fewer when there are fewer)."""
    if k < 0:
        raise ValueError(f"k={k}: the number of elites must be >= 0")
    _island(members)
    return verified(dedupe(members))[:k]


def tournament(members: Sequence[Member], rng: random.Random, size: int = 3) -> Member:
    """The best of `size` distinct verified members drawn at random (all when fewer)."""
    if size < 1:
        raise ValueError(f"tournament size {size}: need >= 1")
    pool = _pool(members)
    return min(rng.sample(pool, min(size, len(pool))), key=rank_key)


def rank_pick(members: Sequence[Member], rng: random.Random) -> Member:
    """Linear rank selection: among n verified members, the i-th best (i = 0..n-1) is drawn
    with weight n - i, so the order matters but not the size of the speedup gaps."""
    pool = _pool(members)
    n = len(pool)
    return rng.choices(pool, weights=range(n, 0, -1))[0]


def select_parents(
    members: Sequence[Member],
    n: int,
    rng: random.Random,
    method: Method = "tournament",
    tournament_size: int = 3,
) -> list[Member]:
    """`n` parents (with repetition) by tournament or rank selection."""
    if n < 0:
        raise ValueError(f"n={n}: the number of parents must be >= 0")
    if method == "tournament":
        return [tournament(members, rng, tournament_size) for _ in range(n)]
    if method == "rank":
        return [rank_pick(members, rng) for _ in range(n)]
    raise ValueError(f"unknown selection method {method!r}: use 'tournament' or 'rank'")


def crossover_pair(
    members: Sequence[Member], rng: random.Random, tournament_size: int = 3
) -> tuple[Member, Member]:
    """Two different verified parents; the second from another lineage when one exists, so
    the child can combine ideas that evolved apart."""
    pool = _pool(members, need=2)
    first = tournament(pool, rng, tournament_size)
    others = [m for m in pool if m.lineage_id != first.lineage_id]
    if not others:
        others = [m for m in pool if m.candidate_id != first.candidate_id]
    return first, tournament(others, rng, tournament_size)
