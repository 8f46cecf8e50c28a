"""Runs whose driver died read as interrupted (by process on its host, by heartbeat
elsewhere), a search settles them in the file, and a version 2 file keeps its runs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import duckdb

from kforge_search.store.ids import utcnow
from kforge_search.store.reader import Reader
from kforge_search.store.records import RunRecord
from kforge_search.store.runs import STALE_S, list_runs, run_state, this_host
from kforge_search.store.schema import MIGRATIONS
from kforge_search.store.writer import Writer


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_running_run_is_interrupted_when_its_driver_is_gone():
    now = utcnow()
    fresh, stale = now - timedelta(seconds=2), now - timedelta(seconds=STALE_S + 5)
    here = this_host()
    assert run_state("finished", here, _dead_pid(), stale, stale, now=now) == "finished"
    assert run_state("running", here, os.getpid(), stale, stale, now=now) == "running"
    assert run_state("running", here, _dead_pid(), fresh, fresh, now=now) == "interrupted"
    assert run_state("running", "elsewhere", 123, fresh, stale, now=now) == "running"
    assert run_state("running", "elsewhere", 123, stale, stale, now=now) == "interrupted"
    assert run_state("running", None, None, None, stale, now=now) == "interrupted"  # no beats


def test_a_search_settles_dead_runs_and_leaves_live_ones(tmp_path):
    db = tmp_path / "k.duckdb"
    now = utcnow()
    stale = now - timedelta(seconds=STALE_S + 5)

    def run(pid: int, host: str = this_host(), status: str = "running", beat=now) -> RunRecord:
        return RunRecord("search", "{}", "t", status, now, host=host, pid=pid, heartbeat_at=beat)

    dead, live, far, done = (
        run(_dead_pid()),
        run(os.getpid()),
        run(9, "far", beat=stale),
        run(_dead_pid(), status="finished"),
    )
    with Writer(db) as writer:
        writer.write([dead, live, far, done])
        assert sorted(writer.settle_runs()) == sorted([dead.id, far.id])
        writer.beat(live.id)
        writer.beat(done.id)  # a finished run takes no beat
    with Reader.open(db) as reader:
        stored = dict(reader.query("SELECT id, status FROM runs").rows)
        ended = dict(reader.query("SELECT id, ended_at FROM runs").rows)
        beats = dict(reader.query("SELECT id, heartbeat_at FROM runs").rows)
        listed = {r.id: r.state for r in list_runs(reader)}
    assert stored == {dead.id: "interrupted", far.id: "interrupted", live.id: "running",
                      done.id: "finished"}  # fmt: skip
    assert ended[far.id] == stale and beats[live.id] > now and beats[done.id] == now
    assert listed == stored


def test_a_version_2_file_keeps_its_runs_and_shows_an_old_running_one_interrupted(tmp_path):
    db = tmp_path / "v2.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR "
        "NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP))"
    )
    for migration in MIGRATIONS[:2]:
        for statement in migration.statements:
            con.execute(statement)
        con.execute("INSERT INTO schema_version (version, description) VALUES (?, 'old')",
                    [migration.version])  # fmt: skip
    con.execute(
        "INSERT INTO runs (id, kind, config, tool_version, status, started_at) VALUES "
        "('old', 'search', '{}', '0.0', 'running', now()::TIMESTAMP - INTERVAL 1 DAY)"
    )
    con.execute(
        "INSERT INTO llm_calls (id, role, model, status, created_at) VALUES "
        "('c', 'writer', 'm', 'ok', now()::TIMESTAMP)"
    )
    con.close()
    with Writer(db) as writer:  # migrates to the newest schema
        assert writer.version == MIGRATIONS[-1].version
    with Reader.open(db) as reader:
        (row,) = list_runs(reader)
        call = reader.query("SELECT status, lineage_id, attempts, error FROM llm_calls").rows
    assert (row.id, row.state) == ("old", "interrupted")
    assert call == (("ok", None, None, None),)
