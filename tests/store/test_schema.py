"""Schema: versioned migrations, and records that match their tables column for column."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from kforge_search.store.reader import Reader
from kforge_search.store.records import RECORD_TYPES, CandidateRecord, EvaluationRecord
from kforge_search.store.schema import LATEST, MIGRATIONS, SchemaError, current_version
from kforge_search.store.writer import Writer


def test_migrations_are_ordered_and_recorded(tmp_path):
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    db = tmp_path / "k.duckdb"
    with Writer(db) as writer:
        assert writer.version == LATEST
        rows = writer.reader().query("SELECT version FROM schema_version").rows
    assert rows == tuple((m.version,) for m in MIGRATIONS)
    with Writer(db) as writer:  # reopening applies nothing twice
        assert writer.reader().query("SELECT count(*) FROM schema_version").rows[0][0] == LATEST


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda c: c.TABLE)
def test_record_fields_are_the_table_columns(tmp_path, cls):
    with Writer(tmp_path / "k.duckdb") as writer:
        columns = writer.reader().query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
            [cls.TABLE],
        )
    assert {f.name for f in dataclasses.fields(cls)} == {c for (c,) in columns.rows}


def test_a_newer_schema_is_refused_with_the_fix(tmp_path):
    db = tmp_path / "k.duckdb"
    Writer(db).close()
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version (version, description) VALUES (?, 'future')",
                [LATEST + 1])  # fmt: skip
    con.close()
    with pytest.raises(SchemaError, match="upgrade kforge-search"):
        Writer(db)
    with pytest.raises(SchemaError, match="upgrade kforge-search"):
        Reader.open(db)


def test_an_unmigrated_file_asks_for_migrate_when_read(tmp_path):
    db = tmp_path / "k.duckdb"
    duckdb.connect(str(db)).close()
    with pytest.raises(SchemaError, match="kforge db migrate"):
        Reader.open(db)
    with Writer(db) as writer:
        assert current_version(writer.con) == LATEST


def test_records_check_themselves():
    with pytest.raises(ValueError, match="pass_kind"):
        CandidateRecord("c1", "p", "cpu-cpp", "src", pass_kind="creative")
    with pytest.raises(ValueError, match="itself as a parent"):
        CandidateRecord("c1", "p", "cpu-cpp", "src", parent_ids=("c1",))
    with pytest.raises(ValueError, match="status"):
        EvaluationRecord("e", "c", "p", "cpu-cpp", "hw", "FINE", "done", "strict")
    with pytest.raises(ValueError, match="only OK is timed"):
        EvaluationRecord("e", "c", "p", "cpu-cpp", "hw", "INCORRECT", "verify", "strict",
                         speedup_eager=2.0)  # fmt: skip
    assert CandidateRecord("c1", "p", "cpu-cpp", "src").lineage_id == "c1"


def test_a_version_1_file_gains_evaluation_phases_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR "
        "NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP))"
    )
    for statement in MIGRATIONS[0].statements:
        con.execute(statement)
    con.execute("INSERT INTO schema_version (version, description) VALUES (1, 'v1')")
    con.execute(
        "INSERT INTO evaluations (id, candidate_id, problem_id, platform, hardware_id, status, "
        "stage, policy, precision, created_at) VALUES ('e1', 'c1', 'p1', 'cpu-cpp', 'hw', 'OK', "
        "'done', 'strict', 'fp32', now()::TIMESTAMP)"
    )
    con.close()
    with pytest.raises(SchemaError, match="kforge db migrate"):
        Reader.open(db)
    with Writer(db) as writer:
        assert writer.version == LATEST >= 2
        writer.write([EvaluationRecord("e2", "c2", "p1", "cpu-cpp", "hw", "OK", "done",
                                       "strict", phases='{"build": 1.5}')])  # fmt: skip
        rows = writer.reader().query("SELECT id, phases FROM evaluations ORDER BY id").rows
    assert [r[0] for r in rows] == ["e1", "e2"]
    assert rows[0][1] is None and '"build": 1.5' in rows[1][1]
