"""The `kernels` table: one row per evaluated candidate, kept current by the writer.

Retrieval ranks kernels; aggregating every evaluation per candidate at query time costs
~100 ms at 300k evaluations, so the writer refreshes the rows of the candidates a batch
touched, in the batch's own transaction. It is derived: never exported, rebuilt on import.

"Verified" means: at least one OK evaluation, and no evaluation (at any sizes, on any
machine) that was INCORRECT, crashed (RUNTIME_ERROR) or found it not generalizing to unseen
sizes. Timeouts and infrastructure errors do not count against a kernel. The score is the
best speedup vs eager of the OK evaluations (0 when their times are not meaningful, as
under an interpreter).
"""

from __future__ import annotations

import duckdb

TOUCHED = "kforge_touched"  # a registered relation with one column, candidate_id

CREATE = """CREATE TABLE kernels (
    candidate_id VARCHAR PRIMARY KEY, problem_id VARCHAR NOT NULL, platform VARCHAR NOT NULL,
    lineage_id VARCHAR NOT NULL, generation INTEGER NOT NULL, evaluations INTEGER NOT NULL,
    best_status VARCHAR NOT NULL, verified BOOLEAN NOT NULL, score DOUBLE NOT NULL,
    speedup_eager DOUBLE, speedup_compile DOUBLE, p50_ms DOUBLE, hardware_id VARCHAR)"""

_OK = "FILTER (WHERE e.status = 'OK')"
_KEY = "coalesce(e.speedup_eager, 0)"
_SELECT = f"""
    SELECT e.candidate_id, any_value(e.problem_id), any_value(e.platform),
        coalesce(any_value(c.lineage_id), e.candidate_id), coalesce(any_value(c.generation), 0),
        count(*),
        CASE WHEN bool_or(e.status = 'OK') THEN 'OK' ELSE arg_max(e.status, e.created_at) END,
        bool_or(e.status = 'OK') AND NOT bool_or(
            e.status IN ('INCORRECT', 'RUNTIME_ERROR') OR coalesce(e.generalizes = FALSE, FALSE)),
        coalesce(max(e.speedup_eager) {_OK}, 0),
        max(e.speedup_eager) {_OK},
        arg_max(e.speedup_compile, {_KEY}) {_OK},
        arg_max(e.p50_ms, {_KEY}) {_OK},
        arg_max(e.hardware_id, {_KEY}) {_OK}
    FROM evaluations e LEFT JOIN candidates c ON c.id = e.candidate_id"""


def refresh(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute the rows of the candidates in the registered TOUCHED relation."""
    con.execute(
        f"INSERT OR REPLACE INTO kernels {_SELECT} "
        f"WHERE e.candidate_id IN (SELECT candidate_id FROM {TOUCHED}) GROUP BY e.candidate_id"
    )


def rebuild(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute every row (after a migration that changes what the table derives)."""
    con.execute("DELETE FROM kernels")
    con.execute(f"INSERT INTO kernels {_SELECT} GROUP BY e.candidate_id")
