"""Builders of Members and random populations for the search tests."""

from __future__ import annotations

import random

from kforge_search.evaluator import Status
from kforge_search.search.population import Member

FAILED = (Status.INCORRECT, Status.RUNTIME_ERROR, Status.COMPILE_ERROR, Status.REJECTED)


def member(
    cid: str,
    speedup: float | None = 1.0,
    *,
    verified: bool = True,
    lineage: str = "",
    platform: str = "cuda-triton",
    problem: str = "p1",
    source: str = "",
    generation: int = 0,
    status: Status | None = None,
) -> Member:
    return Member(
        candidate_id=cid,
        lineage_id=lineage or cid,
        parent_ids=(),
        generation=generation,
        platform=platform,
        problem_id=problem,
        source_hash=source or f"h-{cid}",
        status=status or (Status.OK if verified else Status.INCORRECT),
        speedup=speedup,
        p50_ms=1.0 / speedup if speedup else None,
        verified=verified,
    )


def random_population(rng: random.Random, size: int, p_verified: float) -> list[Member]:
    """One island; unverified members are often faster than every verified one (a wrong
    kernel can be very fast), and some share a source with a verified member."""
    members = []
    for i in range(size):
        ok = rng.random() < p_verified
        speedup = rng.uniform(0.1, 3.0) if ok else rng.choice([None, rng.uniform(0.1, 50.0)])
        status = rng.choice([Status.OK, Status.TIMEOUT, Status.INFRA_ERROR])
        members.append(
            member(
                f"c{i}",
                speedup,
                verified=ok,
                lineage=f"l{rng.randrange(4)}",
                source=f"h{rng.randrange(size)}",
                status=status if ok else rng.choice([Status.OK, *FAILED]),
                generation=rng.randrange(5),
            )
        )
    return members
