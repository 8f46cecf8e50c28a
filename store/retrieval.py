"""Retrieval for agents: verified kernels worth showing in a prompt.

- `cross_platform`: the same problem solved on other platforms (a reference to port);
- `similar_problems`: kernels of problems with similar op signatures, on this platform;
- `diverse_top_k`: the best kernels of a problem, spread over lineages;
- `one_shot_examples`: one short, verified, fast example per platform.
All return KernelHits, best first; an empty list when the store has none.
"""

from __future__ import annotations

from collections.abc import Sequence

from .connection import StoreError
from .queries import KernelHit, hits, verified_sql
from .reader import Reader
from .signature import VECTOR_DIM


def cross_platform(reader: Reader, problem_id: str, platform: str, k: int = 3) -> list[KernelHit]:
    """The best verified kernel of `problem_id` on each platform other than `platform`."""
    ranked = f"""SELECT *, row_number() OVER (ORDER BY score DESC, platform) AS ord
        FROM ({verified_sql("problem_id = ? AND platform <> ?")})
        QUALIFY row_number() OVER (PARTITION BY platform ORDER BY score DESC, p50_ms) = 1
        ORDER BY ord LIMIT ?"""
    return hits(reader, ranked, [problem_id, platform, k])


def _problem_vector(reader: Reader, problem_id: str) -> list[float]:
    rows = reader.query("SELECT op_vector FROM problems WHERE id = ?", [problem_id]).rows
    if not rows:
        raise StoreError(
            f"problem {problem_id} is not in {reader.path}: store it first "
            "(store.from_eval.problem_record) or pass vector=op_signature(source).vector()"
        )
    return list(rows[0][0])


def similar_problems(
    reader: Reader,
    problem_id: str,
    platform: str,
    k: int = 5,
    min_similarity: float = 0.5,
    vector: Sequence[float] | None = None,
) -> list[KernelHit]:
    """The best verified kernel of each problem similar to `problem_id`, on `platform`.

    Similarity is the cosine of op-signature vectors (store.signature); the problem itself
    is left out. Most similar first, then fastest.
    """
    query = list(vector) if vector is not None else _problem_vector(reader, problem_id)
    if len(query) != VECTOR_DIM:
        raise ValueError(f"vector has {len(query)} values, needs {VECTOR_DIM}")
    ranked = f"""
        WITH sim AS (
            SELECT id, array_cosine_similarity(op_vector, ?::FLOAT[{VECTOR_DIM}]) AS similarity
            FROM problems WHERE id <> ?),
        near AS (SELECT * FROM sim WHERE NOT isnan(similarity) AND similarity >= ?)
        SELECT v.*, near.similarity,
            row_number() OVER (ORDER BY near.similarity DESC, v.score DESC) AS ord
        FROM ({verified_sql("platform = ? AND problem_id IN (SELECT id FROM near)")}) v
        JOIN near ON near.id = v.problem_id
        QUALIFY row_number() OVER (PARTITION BY v.problem_id ORDER BY v.score DESC) = 1
        ORDER BY ord LIMIT ?"""
    params = [query, problem_id, min_similarity, platform, k]
    return hits(reader, ranked, params, extra=", h.similarity")


def diverse_top_k(reader: Reader, problem_id: str, platform: str, k: int = 5) -> list[KernelHit]:
    """The top kernels of a problem, taken round-robin over lineages.

    The best of every lineage comes before the second best of any, so one prolific lineage
    cannot fill the list.
    """
    ranked = f"""
        SELECT *, row_number() OVER (ORDER BY in_lineage, score DESC, candidate_id) AS ord
        FROM (
            SELECT v.*, row_number() OVER (
                PARTITION BY v.lineage_id ORDER BY v.score DESC, v.p50_ms, v.candidate_id
            ) AS in_lineage
            FROM ({verified_sql("problem_id = ? AND platform = ?")}) v)
        ORDER BY ord LIMIT ?"""
    return hits(reader, ranked, [problem_id, platform, k])


def one_shot_examples(reader: Reader, platforms: Sequence[str] = ()) -> list[KernelHit]:
    """One example per platform: a verified kernel of the simplest problem (fewest ops),
    preferring kernels faster than eager, then the fastest."""
    where = "TRUE"
    if platforms:
        where = f"platform IN ({', '.join('?' for _ in platforms)})"
    key = "(v.score >= 1, -coalesce(p.n_ops, 999), v.score)"  # max: fast, then fewest ops
    ranked = f"""
        WITH pick AS (
            SELECT arg_max(v.candidate_id, {key}) AS candidate_id
            FROM ({verified_sql(where)}) v LEFT JOIN (
                SELECT id, len(string_split(op_signature, ',')) AS n_ops FROM problems
            ) p ON p.id = v.problem_id
            GROUP BY v.platform)
        SELECT k.*, row_number() OVER (ORDER BY k.platform) AS ord
        FROM kernels k JOIN pick ON pick.candidate_id = k.candidate_id"""
    return hits(reader, ranked, list(platforms))
