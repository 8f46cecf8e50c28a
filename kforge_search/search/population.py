"""Members of a search's population, de-duplication, and islands (one per platform).

A `Member` is what selection needs to know about one evaluated candidate; its source lives
in the store, keyed by `candidate_id`. A population holds the members of one problem; its
islands are its platforms, and parents are chosen within an island only (`selection`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kforge_search.evaluator.result import EvalResult, Status
from kforge_search.problem import source_hash


@dataclass(frozen=True)
class Member:
    """One evaluated candidate as selection sees it."""

    candidate_id: str  # source_hash(source, platform), as EvalResult.candidate_hash
    lineage_id: str  # the root of its lineage (its own id for a root)
    parent_ids: tuple[str, ...]
    generation: int
    platform: str
    problem_id: str
    source_hash: str  # kforge_search.problem.source_hash(source): normalized, no platform
    status: Status
    speedup: float | None  # vs the faster of the eager and torch.compile baselines
    p50_ms: float | None
    verified: bool  # OK and never INCORRECT, crashing or failing unseen sizes

    def __post_init__(self) -> None:
        if not self.candidate_id or not self.lineage_id or not self.source_hash:
            raise ValueError(f"{self}: candidate_id, lineage_id and source_hash must be set")
        if self.generation < 0:
            raise ValueError(f"generation {self.generation} of {self.candidate_id}: need >= 0")
        if self.candidate_id in self.parent_ids:
            raise ValueError(f"candidate {self.candidate_id} lists itself as a parent")
        if self.speedup is not None and not (math.isfinite(self.speedup) and self.speedup >= 0):
            raise ValueError(f"speedup {self.speedup} of {self.candidate_id}: need >= 0 or None")
        if self.p50_ms is not None and not self.p50_ms > 0:
            raise ValueError(f"p50_ms {self.p50_ms} of {self.candidate_id}: need > 0 or None")
        object.__setattr__(self, "status", Status(self.status))
        if self.verified and self.status in _AGAINST:
            raise ValueError(
                f"{self.candidate_id} is marked verified but its status is {self.status}: "
                "an INCORRECT or RUNTIME_ERROR evaluation unverifies a kernel (store/summary.py)"
            )

    @property
    def fitness(self) -> float:
        """The score selection ranks by: the speedup, 0 when unmeasured (cpu-triton)."""
        return self.speedup if self.speedup is not None else 0.0

    @classmethod
    def from_result(
        cls,
        result: EvalResult,
        source: str,
        *,
        lineage_id: str = "",
        parent_ids: tuple[str, ...] = (),
        generation: int = 0,
        verified: bool | None = None,
    ) -> Member:
        """A member from one evaluation; `verified` defaults to OK and not failing unseen
        sizes (pass the store's `kernels.verified` when earlier evaluations exist)."""
        speedups = [s for s in (result.speedup("eager"), result.speedup("compile")) if s]
        timing = result.timing
        return cls(
            candidate_id=result.candidate_hash,
            lineage_id=lineage_id or result.candidate_hash,
            parent_ids=parent_ids,
            generation=generation,
            platform=result.platform,
            problem_id=result.problem_id,
            source_hash=source_hash(source),
            status=result.status,
            speedup=min(speedups) if speedups else None,
            p50_ms=timing.p50_ms if timing and timing.meaningful and result.ok else None,
            verified=(result.ok and result.generalizes != "no") if verified is None else verified,
        )


_AGAINST = (Status.INCORRECT, Status.RUNTIME_ERROR)  # statuses a verified kernel never has


def rank_key(member: Member) -> tuple[float, str]:
    """Best first: higher fitness, then the candidate id (a deterministic tie-break)."""
    return (-member.fitness, member.candidate_id)


def verified(members: Iterable[Member]) -> list[Member]:
    """The verified members, best first."""
    return sorted((m for m in members if m.verified), key=rank_key)


def dedupe(members: Iterable[Member]) -> list[Member]:
    """One member per platform and normalized source (the verified, then the fittest copy),
    in the order of each source's first appearance."""
    best: dict[tuple[str, str], Member] = {}
    for m in members:
        key = (m.platform, m.source_hash)
        seen = best.get(key)
        if seen is None or (m.verified, m.fitness) > (seen.verified, seen.fitness):
            best[key] = m  # replacing a value keeps the key's first position
    return list(best.values())


def new_sources(sources: Iterable[str], seen: Iterable[str] = ()) -> list[str]:
    """The sources whose normalized hash is neither in `seen` nor earlier in `sources`:
    what is worth evaluating out of an agent's proposals (comments and formatting do not
    make a new kernel)."""
    known = set(seen)
    fresh = []
    for source in sources:
        digest = source_hash(source)
        if digest not in known:
            known.add(digest)
            fresh.append(source)
    return fresh


def islands(members: Iterable[Member]) -> dict[str, list[Member]]:
    """Members grouped by platform (the islands), platforms sorted; within an island in
    the order given."""
    groups: dict[str, list[Member]] = {}
    for m in members:
        groups.setdefault(m.platform, []).append(m)
    return dict(sorted(groups.items()))


def references_for(members: Iterable[Member], platform: str, per_island: int = 1) -> list[Member]:
    """The best verified members of every other island, offered to `platform`'s island as
    references to port (never as parents: their language differs). Best first."""
    if per_island < 0:
        raise ValueError(f"per_island={per_island}: need >= 0")
    offered = [
        m
        for name, group in islands(members).items()
        if name != platform
        for m in verified(dedupe(group))[:per_island]
    ]
    return sorted(offered, key=rank_key)
