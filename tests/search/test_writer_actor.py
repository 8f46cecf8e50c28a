"""The writer actor writes batches to a real DuckDB file, idempotently, across restarts."""

from __future__ import annotations

import time

import pytest
import ray

from kforge_search.actors.writer import BatchedWriter, WriterUnavailable, start_writer
from kforge_search.store.reader import Reader
from kforge_search.store.records import RunRecord
from kforge_search.store.writer import Writer
from tests.store.factories import candidate, evaluation, problem_record

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _records(n: int) -> list:
    problem = problem_record("p", "torch.relu(self.linear(x))")
    records: list = [problem]
    parent = None
    for i in range(n):
        cand = candidate(problem, "cpu-cpp", f"k{i}", parent)
        records += [cand, evaluation(cand, 1.0 + i / 10)]
        parent = cand
    return records


def _count(path, table: str) -> int:
    with Reader.open(path) as reader:
        return reader.query(f"SELECT count(*) FROM {table}").rows[0][0]


def test_writer_actor_writes_batches_idempotently_and_survives_a_restart(tmp_path):
    path = tmp_path / "kforge.duckdb"
    actor = start_writer(path)
    run = RunRecord("search", "{}", "test")
    batched = BatchedWriter(actor, batch_size=4, max_in_flight=2)
    batched.add([run, *_records(5)])  # 1 run, 1 problem, 5 candidates, 5 evaluations
    reports = batched.flush()
    assert len(reports) == 3  # 12 records in batches of 4
    assert sum(r.total_inserted for r in reports) == 12

    again = ray.get(actor.write.remote(_records(5)))  # a retried batch adds nothing
    assert again.total_inserted == 0 and again.rows == 11

    pid = ray.get(actor.ping.remote())
    ray.kill(actor, no_restart=False)  # dies like a crash; Ray restarts it
    more = _records(7)[-4:]  # two new candidates with their evaluations
    report = ray.get(actor.write.remote(more), timeout=60)
    assert report.total_inserted == 4
    assert ray.get(actor.ping.remote()) != pid  # a new process reopened the file
    ray.get(actor.finish_run.remote(run.id, "finished"))

    ray.get(actor.close.remote())
    ray.kill(actor)
    assert _count(path, "candidates") == 7
    assert _count(path, "evaluations") == 7
    with Reader.open(path) as reader:
        assert reader.query("SELECT status FROM runs").rows == (("finished",),)
        verified = reader.query("SELECT count(*) FROM kernels WHERE verified").rows[0][0]
    assert verified == 7


def test_a_file_held_by_another_writer_is_refused_clearly(tmp_path):
    path = tmp_path / "held.duckdb"
    started = time.monotonic()
    with Writer(path), pytest.raises(WriterUnavailable, match=r"in use by process \d+"):
        start_writer(path, timeout_s=60)
    assert time.monotonic() - started < 30  # refused, not restarted forever


def test_old_records_are_sent_and_a_busy_driver_keeps_beating(tmp_path):
    from kforge_search.actors.writer import Heartbeat
    from kforge_search.store.ids import utcnow

    path = tmp_path / "beat.duckdb"
    actor = start_writer(path)
    started = utcnow()
    run = RunRecord("search", "{}", "test", started_at=started, heartbeat_at=started)
    batched = BatchedWriter(actor, batch_size=500, max_age_s=0.2)
    batched.add([run])  # far below the batch size: kept
    time.sleep(0.3)
    batched.add(_records(1))  # the oldest waited past max_age_s: all sent
    assert not batched._buffer
    with Heartbeat(actor, every_s=0.2) as heart:
        heart.runs.append(run.id)
        until = time.monotonic() + 1.5
        while time.monotonic() < until:  # the driver's thread busy in Python
            sum(i * i for i in range(10_000))
    batched.flush()
    ray.get(actor.close.remote())
    ray.kill(actor)
    with Reader.open(path) as reader:
        (beat,) = reader.query("SELECT heartbeat_at FROM runs").rows[0]
        assert _count(path, "candidates") == 1
    assert (beat - started).total_seconds() >= 1.0  # beaten while the driver was busy
