"""Read queries behind `kforge db`: best kernels, a candidate's lineage and details, stats.

Rankings read the `kernels` table (store/summary.py says what "verified" and the score are).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .connection import StoreError
from .reader import QueryResult, Reader
from .schema import TABLES, current_version


def verified_sql(where: str = "TRUE") -> str:
    """Verified kernels (store/summary.py) matching `where`, over `kernels` columns."""
    return f"SELECT * FROM kernels WHERE verified AND ({where})"


@dataclass(frozen=True)
class KernelHit:
    """A verified kernel, with what an agent needs to use it as an example."""

    candidate_id: str
    problem_id: str
    problem_name: str
    platform: str
    lineage_id: str
    generation: int
    speedup_eager: float | None
    speedup_compile: float | None
    p50_ms: float | None
    device_name: str
    source: str = field(repr=False)
    similarity: float = 1.0  # to the asked problem (1.0: the same problem)


HIT_COLUMNS = """h.candidate_id, h.problem_id, coalesce(p.name, ''), h.platform,
    h.lineage_id, h.generation, h.speedup_eager, h.speedup_compile, h.p50_ms,
    coalesce(hw.device_name, ''), c.source"""
HIT_JOINS = """JOIN candidates c ON c.id = h.candidate_id
    LEFT JOIN problems p ON p.id = h.problem_id
    LEFT JOIN hardware hw ON hw.id = h.hardware_id"""


def hits(reader: Reader, ranked_sql: str, params: list[Any], extra: str = "") -> list[KernelHit]:
    """KernelHits for `ranked_sql` (`kernels` columns plus `ord`), in `ord` order."""
    sql = f"""WITH h AS ({ranked_sql})
        SELECT {HIT_COLUMNS}{extra} FROM h {HIT_JOINS} ORDER BY h.ord"""
    return [KernelHit(*row) for row in reader.query(sql, params).rows]


def best_kernels(
    reader: Reader, problem: str | None = None, platform: str | None = None, limit: int = 10
) -> list[KernelHit]:
    """The best verified kernels, optionally of one problem (id or name) and/or platform."""
    where, params = ["TRUE"], []
    if problem:
        where.append("problem_id = ?")
        params.append(resolve_problem(reader, problem))
    if platform:
        where.append("platform = ?")
        params.append(platform)
    ranked = f"""SELECT *, row_number() OVER (ORDER BY score DESC, p50_ms) AS ord FROM (
        {verified_sql(" AND ".join(where))} ORDER BY score DESC, p50_ms LIMIT ?)"""
    return hits(reader, ranked, [*params, limit])


def _resolve(reader: Reader, table: str, ref: str, hint: str, extra: str = "") -> str:
    sql = f"SELECT id FROM {table} WHERE starts_with(id, ?){extra} LIMIT 3"
    ids = [row[0] for row in reader.query(sql, [ref, ref] if extra else [ref]).rows]
    if len(ids) == 1:
        return ids[0]
    what = table.rstrip("s")
    if not ids:
        raise StoreError(f"no {what} {ref!r} in {reader.path}: {hint}")
    raise StoreError(f"{what} {ref!r} is ambiguous ({', '.join(ids)}, ...): give more of the id")


def resolve_candidate(reader: Reader, ref: str) -> str:
    return _resolve(reader, "candidates", ref, "`kforge db best` lists candidate ids")


def resolve_problem(reader: Reader, ref: str) -> str:
    hint = "`kforge db query 'SELECT id, name FROM problems'` lists them"
    return _resolve(reader, "problems", ref, hint, " OR name = ?")


@dataclass(frozen=True)
class LineageStep:
    candidate_id: str
    depth: int  # 0: the candidate asked about, 1: its parents, ...
    generation: int
    pass_kind: str
    agent: str
    model: str
    parent_ids: tuple[str, ...]
    best_status: str  # "OK" if any evaluation passed, else the latest status ("": none)
    speedup_eager: float | None
    speedup_compile: float | None


def _ancestry(reader: Reader, cid: str, max_depth: int) -> dict[str, int]:
    """Ancestor id -> depth (shortest), walking parent_ids. Each round fetches the whole
    lineages of the ids not seen yet, so a chain of any length takes one or two queries."""
    parents: dict[str, tuple[str, ...]] = {}
    depth, frontier = {cid: 0}, [cid]
    while frontier:
        unseen = [i for i in frontier if i not in parents]
        if unseen:
            marks = ", ".join("?" for _ in unseen)
            rows = reader.query(
                "SELECT id, parent_ids FROM candidates WHERE lineage_id IN "
                f"(SELECT lineage_id FROM candidates WHERE id IN ({marks}))",
                unseen,
            ).rows
            parents.update((i, tuple(p or ())) for i, p in rows)
            parents.update((i, ()) for i in unseen if i not in parents)  # not stored
        step = []
        for child in frontier:
            for parent in parents[child]:
                if parent not in depth and depth[child] < max_depth:
                    depth[parent] = depth[child] + 1
                    step.append(parent)
        frontier = step
    return depth


def lineage(reader: Reader, candidate: str, max_depth: int = 1000) -> list[LineageStep]:
    """The candidate and its ancestors (all parents, recursively), nearest first."""
    depth = _ancestry(reader, resolve_candidate(reader, candidate), max_depth)
    ids = list(depth)
    rows = reader.query(
        f"""SELECT c.id, c.generation, c.pass_kind, c.agent, c.model, c.parent_ids,
            coalesce(k.best_status, ''), k.speedup_eager, k.speedup_compile
        FROM candidates c LEFT JOIN kernels k ON k.candidate_id = c.id
        WHERE c.id IN ({", ".join("?" for _ in ids)})""",
        ids,
    ).rows
    found = {r[0]: r for r in rows}
    steps = [
        LineageStep(i, depth[i], *found[i][1:5], tuple(found[i][5] or ()), *found[i][6:])
        if i in found
        else LineageStep(i, depth[i], -1, "?", "", "", (), "not stored", None, None)
        for i in ids
    ]
    return sorted(steps, key=lambda s: (s.depth, -s.generation, s.candidate_id))


@dataclass(frozen=True)
class CandidateDetail:
    candidate: dict[str, Any]
    evaluations: QueryResult
    profiles: QueryResult
    recommendations: QueryResult


def candidate_detail(reader: Reader, candidate: str) -> CandidateDetail:
    """A candidate's row (with source), its evaluations, profiles and recommendations."""
    cid = resolve_candidate(reader, candidate)
    row = reader.query("SELECT * FROM candidates WHERE id = ?", [cid]).dicts()[0]
    evaluations = reader.query(
        """SELECT e.id, e.status, e.error_kind, e.stage, hw.device_name, e.size_set,
            e.policy, e.precision, e.p50_ms, e.runs, e.speedup_eager, e.speedup_compile,
            e.roofline_fraction, e.generalizes, e.message, e.created_at
        FROM evaluations e LEFT JOIN hardware hw ON hw.id = e.hardware_id
        WHERE e.candidate_id = ? ORDER BY e.created_at""",
        [cid],
    )
    profiles = reader.query(
        "SELECT id, tool, metrics, octet_length(raw) AS raw_bytes, created_at FROM profiles "
        "WHERE candidate_id = ? ORDER BY created_at",
        [cid],
    )
    recommendations = reader.query(
        "SELECT id, analysis, suggestions, model, created_at FROM recommendations "
        "WHERE candidate_id = ? ORDER BY created_at",
        [cid],
    )
    return CandidateDetail(row, evaluations, profiles, recommendations)


@dataclass(frozen=True)
class StoreStats:
    schema_version: int
    rows: tuple[tuple[str, int], ...]
    statuses: tuple[tuple[str, int], ...]  # evaluations per status
    platforms: tuple[tuple[str, int, int], ...]  # candidates and verified ones per platform


def stats(reader: Reader) -> StoreStats:
    counts = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in TABLES)
    statuses = "SELECT status, count(*) FROM evaluations GROUP BY status ORDER BY 2 DESC"
    platforms = """SELECT c.platform, count(*), count(*) FILTER (WHERE k.verified)
        FROM candidates c LEFT JOIN kernels k ON k.candidate_id = c.id
        GROUP BY c.platform ORDER BY c.platform"""
    return StoreStats(
        current_version(reader.con),
        reader.query(counts).rows,
        reader.query(statuses).rows,
        reader.query(platforms).rows,
    )


@dataclass(frozen=True)
class Exportable:
    """A candidate's source with what an exported module says about it."""

    candidate_id: str
    problem_name: str
    platform: str
    verified: bool
    speedup_eager: float | None
    speedup_compile: float | None
    device_name: str
    source: str = field(repr=False)


def exportable(reader: Reader, candidate: str) -> Exportable:
    """The candidate (id or unique prefix) with its verification and best speedups."""
    cid = resolve_candidate(reader, candidate)
    (row,) = reader.query(
        """SELECT c.id, coalesce(p.name, c.problem_id), c.platform, coalesce(k.verified, FALSE),
            k.speedup_eager, k.speedup_compile, coalesce(h.device_name, ''), c.source
        FROM candidates c LEFT JOIN problems p ON p.id = c.problem_id
            LEFT JOIN kernels k ON k.candidate_id = c.id
            LEFT JOIN hardware h ON h.id = k.hardware_id
        WHERE c.id = ?""",
        [cid],
    ).rows
    return Exportable(*row)
