"""A writer killed with SIGKILL mid-way: every committed batch survives, no partial batch,
and writing resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from kforge_search.store.reader import Reader
from kforge_search.store.writer import Writer
from tests.conftest import ROOT

BATCH = 1500  # candidates per batch, each with one evaluation: 3000 rows per transaction

WRITER = textwrap.dedent(
    """
    import sys
    from kforge_search.store.ids import content_id
    from kforge_search.store.records import CandidateRecord, EvaluationRecord
    from kforge_search.store.writer import Writer

    path, first, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    writer = Writer(path)
    for b in range(first, first + 1000):
        rows = []
        for i in range(size):
            cid = f"{b:05d}-{i:05d}"
            rows.append(CandidateRecord(cid, "p", "cpu-cpp", "x = %d" % i, run_id=f"b{b}"))
            rows.append(EvaluationRecord(content_id(cid), cid, "p", "cpu-cpp", "hw", "OK",
                                         "done", "strict", run_id=f"b{b}", speedup_eager=1.5))
        print("begin", b, flush=True)
        writer.write(rows)
        print("done", b, flush=True)
    """
)


def _start(db, first: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(first), str(BATCH)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def _batches(db) -> dict[str, tuple[int, int]]:
    """run_id -> (candidates, evaluations) of that batch."""
    with Reader.open(db) as reader:
        rows = reader.query(
            """SELECT c.run_id, c.n, coalesce(e.n, 0) FROM
                (SELECT run_id, count(*) AS n FROM candidates GROUP BY run_id) c
                LEFT JOIN (SELECT run_id, count(*) AS n FROM evaluations GROUP BY run_id) e
                ON e.run_id = c.run_id"""
        ).rows
    return {run: (c, e) for run, c, e in rows}


def test_sigkill_mid_batch_loses_no_committed_batch_and_keeps_no_partial_one(tmp_path):
    db = tmp_path / "k.duckdb"
    proc = _start(db, 0)
    assert proc.stdout is not None
    committed = -1
    for line in proc.stdout:
        kind, number = line.split()
        if kind == "done":
            committed = int(number)
        if kind == "begin" and committed >= 4:
            time.sleep(0.01)  # inside the sixth batch's transaction (it takes ~100 ms)
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    with Writer(db):  # a restart: DuckDB replays its write-ahead log
        pass
    batches = _batches(db)
    assert all(counts == (BATCH, BATCH) for counts in batches.values()), batches  # no partial
    present = sorted(int(run[1:]) for run in batches)
    assert present == list(range(len(present)))  # a prefix: no batch lost in the middle
    assert present[-1] >= committed  # every batch reported committed is there

    proc = _start(db, present[-1] + 1)  # writing resumes where it stopped
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.split() == ["done", str(present[-1] + 2)]:
            break
    proc.kill()
    proc.wait(timeout=30)
    with Writer(db):
        pass
    batches = _batches(db)
    assert all(counts == (BATCH, BATCH) for counts in batches.values()), batches
    resumed = sorted(int(run[1:]) for run in batches)
    assert resumed == list(range(len(resumed))) and resumed[-1] >= present[-1] + 2
