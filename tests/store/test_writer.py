"""The single writer: atomic, idempotent batches; a clear message when another process holds
the file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from kforge_search.store.connection import StoreError, StoreLockedError, StoreMissingError
from kforge_search.store.reader import Reader
from kforge_search.store.records import RunRecord
from kforge_search.store.writer import WriteError, Writer
from tests.store.factories import candidate, cli_app, evaluation, problem_record

app = cli_app()


def _rows(writer: Writer, table: str) -> int:
    return writer.reader().query(f"SELECT count(*) FROM {table}").rows[0][0]


def test_a_retried_batch_adds_no_rows(tmp_path):
    p = problem_record("relu", "torch.relu(self.linear(x))")
    cands = [candidate(p, "cpu-cpp", f"c{i}") for i in range(50)]
    batch = [p, *cands, *(evaluation(c, 1.5) for c in cands)]
    with Writer(tmp_path / "k.duckdb") as writer:
        first = writer.write(batch)
        again = writer.write(batch)
        assert first.total_inserted == 101 and first.rows == 101
        assert again.total_inserted == 0 and dict(again.skipped)["evaluations"] == 50
        assert _rows(writer, "candidates") == 50
        assert _rows(writer, "evaluations") == 50
        assert _rows(writer, "kernels") == 50


def test_duplicates_inside_a_batch_keep_the_first(tmp_path):
    p = problem_record("relu", "torch.relu(self.linear(x))")
    c = candidate(p, "cpu-cpp", "c")
    with Writer(tmp_path / "k.duckdb") as writer:
        report = writer.write([c, evaluation(c, 2.0), evaluation(c, 3.0)])
        assert dict(report.inserted)["evaluations"] == 1
        speedup = writer.reader().query("SELECT speedup_eager FROM evaluations").rows
    assert speedup == ((2.0,),)


def test_a_failing_batch_leaves_nothing(tmp_path):
    p = problem_record("relu", "torch.relu(self.linear(x))")
    c = candidate(p, "cpu-cpp", "c")
    bad_run = RunRecord("search", "{not json", "0.1.0")
    with Writer(tmp_path / "k.duckdb") as writer:
        with pytest.raises(WriteError, match="rolled back"):
            writer.write([p, c, evaluation(c, 2.0), bad_run])
        assert [_rows(writer, t) for t in ("problems", "candidates", "evaluations")] == [0, 0, 0]
        writer.write([p, c])  # the writer is still usable
        assert _rows(writer, "candidates") == 1


def test_runs_are_finished_and_reads_go_through_the_writer(tmp_path):
    db = tmp_path / "k.duckdb"
    run = RunRecord("search", '{"budget": 3}', "0.1.0")
    with Writer(db) as writer:
        writer.write([run])
        writer.finish_run(run.id, "interrupted")
        with pytest.raises(ValueError, match="use one of"):
            writer.finish_run(run.id, "done")
        with pytest.raises(StoreError, match=r"Writer\.reader"):
            Reader.open(db)  # a second, read-only open in the writer's process
        rows = writer.reader().query("SELECT status, ended_at IS NOT NULL FROM runs").rows
    assert rows == (("interrupted", True),)


def test_reading_a_missing_database_says_how_to_make_one(tmp_path):
    with pytest.raises(StoreMissingError, match="kforge db import"):
        Reader.open(tmp_path / "none.duckdb")


HOLDER = textwrap.dedent(
    """
    import sys
    from kforge_search.store.writer import Writer
    writer = Writer(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    """
)


@pytest.fixture
def held_db(tmp_path):
    """A database file that another process holds open for writing."""
    db = tmp_path / "held.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield db, proc.pid
    proc.communicate("done\n", timeout=30)


def test_a_held_database_gives_a_clear_error(held_db):
    db, pid = held_db
    for opener in (Reader.open, Writer):
        with pytest.raises(StoreLockedError) as info:
            opener(db)
        assert info.value.pid == pid
        assert f"process {pid}" in str(info.value) and "Wait for that process" in str(info.value)


def test_the_cli_reports_a_held_database_without_a_traceback(held_db):
    db, pid = held_db
    result = CliRunner().invoke(app, ["db", "stats", "--db", str(db)])
    assert result.exit_code == 2
    assert f"in use by process {pid}" in " ".join(result.output.split())
    assert "Traceback" not in result.output
