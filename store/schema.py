"""The versioned schema: ordered migrations, each applied in its own transaction.

`schema_version` holds one row per applied migration. Add a migration by appending to
MIGRATIONS (never edit one that has shipped); records.py must follow the newest columns
(tests/store/test_schema.py checks that every record's fields are its table's columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from . import summary
from .signature import VECTOR_DIM


class SchemaError(RuntimeError):
    """The file's schema does not match this kforge-search; the message says what to do."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


_V1 = (
    f"""CREATE TABLE problems (
        id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, path VARCHAR, source VARCHAR NOT NULL,
        op_signature VARCHAR NOT NULL, op_vector FLOAT[{VECTOR_DIM}] NOT NULL,
        flops DOUBLE, bytes_moved DOUBLE, work_sizes JSON, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE hardware (
        id VARCHAR PRIMARY KEY, device_name VARCHAR NOT NULL, platform VARCHAR NOT NULL,
        driver VARCHAR, torch_version VARCHAR, triton_version VARCHAR,
        fp32_tflops DOUBLE, tf32_tflops DOUBLE, bf16_tflops DOUBLE, mem_gbs DOUBLE,
        peaks_source VARCHAR, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE runs (
        id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, config JSON, tool_version VARCHAR,
        status VARCHAR NOT NULL, started_at TIMESTAMP NOT NULL, ended_at TIMESTAMP)""",
    """CREATE TABLE candidates (
        id VARCHAR PRIMARY KEY, problem_id VARCHAR NOT NULL, platform VARCHAR NOT NULL,
        source VARCHAR NOT NULL, lineage_id VARCHAR NOT NULL, parent_ids VARCHAR[],
        generation INTEGER NOT NULL, pass_kind VARCHAR NOT NULL, agent VARCHAR, model VARCHAR,
        prompt_hash VARCHAR, run_id VARCHAR, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE evaluations (
        id VARCHAR PRIMARY KEY, candidate_id VARCHAR NOT NULL, problem_id VARCHAR NOT NULL,
        platform VARCHAR NOT NULL, hardware_id VARCHAR NOT NULL, status VARCHAR NOT NULL,
        stage VARCHAR NOT NULL, policy VARCHAR NOT NULL, precision VARCHAR NOT NULL,
        run_id VARCHAR, error_kind VARCHAR, message VARCHAR, artifacts JSON,
        size_set VARCHAR, sizes JSON, trials_run INTEGER, trials_passed INTEGER,
        max_abs_err DOUBLE, max_rel_err DOUBLE, atol DOUBLE, rtol DOUBLE,
        timing_method VARCHAR, runs INTEGER, p20_ms DOUBLE, p50_ms DOUBLE, p80_ms DOUBLE,
        timing_meaningful BOOLEAN, speedup_eager DOUBLE, speedup_compile DOUBLE,
        roofline_fraction DOUBLE, generalizes BOOLEAN, warnings VARCHAR[],
        duration_s DOUBLE, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE baselines (
        id VARCHAR PRIMARY KEY, problem_id VARCHAR NOT NULL, hardware_id VARCHAR NOT NULL,
        platform VARCHAR NOT NULL, kind VARCHAR NOT NULL, ok BOOLEAN NOT NULL, sizes JSON,
        timing_method VARCHAR, runs INTEGER, p20_ms DOUBLE, p50_ms DOUBLE, p80_ms DOUBLE,
        error VARCHAR, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE profiles (
        id VARCHAR PRIMARY KEY, candidate_id VARCHAR NOT NULL, tool VARCHAR NOT NULL,
        metrics JSON, raw BLOB, evaluation_id VARCHAR, hardware_id VARCHAR,
        created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE recommendations (
        id VARCHAR PRIMARY KEY, candidate_id VARCHAR NOT NULL, analysis VARCHAR NOT NULL,
        suggestions JSON, evaluation_id VARCHAR, profile_id VARCHAR, agent VARCHAR,
        model VARCHAR, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE llm_calls (
        id VARCHAR PRIMARY KEY, role VARCHAR NOT NULL, model VARCHAR NOT NULL,
        status VARCHAR NOT NULL, tokens_in BIGINT, tokens_out BIGINT, cost_usd DOUBLE,
        latency_s DOUBLE, cached BOOLEAN, run_id VARCHAR, candidate_id VARCHAR,
        created_at TIMESTAMP NOT NULL)""",
    summary.CREATE,
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "tables: problems, hardware, runs, candidates, evaluations, baselines, profiles, "
        "recommendations, llm_calls; kernels (derived)",
        _V1,
    ),
    Migration(
        2,
        "evaluations.phases: seconds per phase of an evaluation (start, setup, build, verify, "
        "time, unseen, ...)",
        ("ALTER TABLE evaluations ADD COLUMN phases JSON",),
    ),
    Migration(
        3,
        "runs.host, pid, heartbeat_at: a run whose driver died reads as interrupted; "
        "llm_calls.lineage_id, attempts, http_status, error: failed calls are results",
        (
            "ALTER TABLE runs ADD COLUMN host VARCHAR",
            "ALTER TABLE runs ADD COLUMN pid INTEGER",
            "ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMP",
            "ALTER TABLE llm_calls ADD COLUMN lineage_id VARCHAR",
            "ALTER TABLE llm_calls ADD COLUMN attempts INTEGER",
            "ALTER TABLE llm_calls ADD COLUMN http_status INTEGER",
            "ALTER TABLE llm_calls ADD COLUMN error VARCHAR",
        ),
    ),
    Migration(
        4,
        "evaluations.peer, speedup, speedup_fp32: the speedup of record over the fastest "
        "PyTorch setting that passes the policy (eager / compile, fp32 or reduced precision), "
        "and the fp32-only figure; baselines.checks, note: each kind against the reference",
        (
            "ALTER TABLE evaluations ADD COLUMN peer VARCHAR",
            "ALTER TABLE evaluations ADD COLUMN speedup DOUBLE",
            "ALTER TABLE evaluations ADD COLUMN speedup_fp32 DOUBLE",
            "ALTER TABLE baselines ADD COLUMN checks JSON",
            "ALTER TABLE baselines ADD COLUMN note VARCHAR",
        ),
    ),
)
LATEST = MIGRATIONS[-1].version
TABLES = (  # the tables of records; `kernels` is derived from them (store/summary.py)
    "problems",
    "hardware",
    "runs",
    "candidates",
    "evaluations",
    "baselines",
    "profiles",
    "recommendations",
    "llm_calls",
)

_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY, description VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP))"""


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The newest applied migration; 0 for an empty file."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()
    if not exists or not exists[0]:
        return 0
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(row[0]) if row else 0


def _too_new(version: int) -> SchemaError:
    return SchemaError(
        f"the database has schema version {version}, newer than this kforge-search knows "
        f"({LATEST}): upgrade kforge-search (pip install -U kforge-search) to open it"
    )


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply the missing migrations in order, one transaction each; returns the version."""
    con.execute(_VERSION_TABLE)
    version = current_version(con)
    if version > LATEST:
        raise _too_new(version)
    for migration in MIGRATIONS:
        if migration.version <= version:
            continue
        con.begin()
        try:
            for statement in migration.statements:
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_version (version, description) VALUES (?, ?)",
                [migration.version, migration.description],
            )
            con.commit()
        except BaseException:
            con.rollback()
            raise
        version = migration.version
    return version


def check_version(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """For read-only opens: the schema must be the newest this kforge-search knows."""
    version = current_version(con)
    if version > LATEST:
        raise _too_new(version)
    if version < LATEST:
        raise SchemaError(
            f"{path} has schema version {version}, this kforge-search needs {LATEST}: "
            f"run `kforge db migrate --db {path}` (with no other process writing it)"
        )
    return version
