"""The single writer: the one read-write connection to a database file.

One process owns it (in a search, a Ray actor wraps this class; outside a search, the CLI
command). A batch of records of any tables is redacted, turned into Arrow tables and
inserted in one transaction with `ON CONFLICT DO NOTHING`: a retried batch adds no rows,
and a process killed mid-batch leaves no part of that batch behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType

import duckdb
import pyarrow as pa

from . import summary
from .arrow import arrow_schema, to_arrow
from .connection import connect
from .ids import utcnow
from .reader import Reader
from .records import RECORD_TYPES, RUN_STATUSES, EvaluationRecord, Record
from .runs import run_state
from .schema import migrate
from .secrets import Redactor

log = logging.getLogger(__name__)
_BATCH = "kforge_batch"
_ORDER = {cls.TABLE: i for i, cls in enumerate(RECORD_TYPES)}


def _touched(groups: dict[str, dict[str, Record]]) -> list[str]:
    """The candidates whose `kernels` row a batch may change."""
    ids = set(groups.get("candidates", {}))
    for record in groups.get("evaluations", {}).values():
        assert isinstance(record, EvaluationRecord)
        ids.add(record.candidate_id)
    return sorted(ids)


class WriteError(RuntimeError):
    """A batch that could not be written; nothing of it was stored."""


@dataclass(frozen=True)
class WriteReport:
    """What one batch did: rows inserted and rows skipped (already there) per table."""

    inserted: tuple[tuple[str, int], ...]
    skipped: tuple[tuple[str, int], ...]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.inserted) + sum(n for _, n in self.skipped)

    @property
    def total_inserted(self) -> int:
        return sum(n for _, n in self.inserted)


class Writer:
    """Owns the read-write connection; migrates on open; writes batches atomically."""

    def __init__(self, path: str | Path, *, redactor: Redactor | None = None):
        self.path = Path(path)
        self.redactor = redactor or Redactor.from_environ()
        self._con: duckdb.DuckDBPyConnection | None = connect(self.path, read_only=False)
        try:
            self.version = migrate(self._con)
        except BaseException:
            self.close()
            raise

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise WriteError(f"the writer of {self.path} is closed: open a new Writer")
        return self._con

    def write(self, records: Iterable[Record]) -> WriteReport:
        """Insert a batch (records of any tables) in one transaction; idempotent by id."""
        started = time.perf_counter()
        groups: dict[str, dict[str, Record]] = {}
        for record in records:
            groups.setdefault(record.TABLE, {}).setdefault(record.id, record)  # first wins
        inserted, skipped = [], []
        con = self.con
        con.begin()
        try:
            for table in sorted(groups, key=_ORDER.__getitem__):
                rows = list(groups[table].values())
                columns = ", ".join(arrow_schema(type(rows[0])).names)
                con.register(_BATCH, to_arrow(rows, self.redactor))
                result = con.execute(
                    f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {_BATCH} "
                    "ON CONFLICT DO NOTHING"
                ).fetchone()
                con.unregister(_BATCH)
                count = int(result[0]) if result else 0
                inserted.append((table, count))
                skipped.append((table, len(rows) - count))
            touched = _touched(groups)
            if touched:
                con.register(summary.TOUCHED, pa.table({"candidate_id": touched}))
                summary.refresh(con)
                con.unregister(summary.TOUCHED)
            con.commit()
        except duckdb.Error as exc:
            con.rollback()
            raise WriteError(
                self.redactor.text(f"batch not written to {self.path} (rolled back): {exc}")
            ) from None
        except BaseException:
            con.rollback()
            raise
        report = WriteReport(tuple(inserted), tuple(skipped), time.perf_counter() - started)
        log.debug("batch: inserted %s, skipped %s", report.inserted, report.skipped)
        return report

    def finish_run(self, run_id: str, status: str, ended_at: datetime | None = None) -> None:
        """Mark a run finished/failed/interrupted (with the heartbeat, the updates the store
        makes)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r}: use one of {RUN_STATUSES}")
        self.con.execute(
            "UPDATE runs SET status = ?, ended_at = ? WHERE id = ?",
            [status, ended_at or utcnow(), run_id],
        )

    def beat(self, run_id: str, at: datetime | None = None) -> None:
        """The driver of a running run is alive (store/runs.py)."""
        self.con.execute(
            "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND status = 'running'",
            [at or utcnow(), run_id],
        )

    def settle_runs(self, now: datetime | None = None) -> list[str]:
        """Mark `interrupted` the running runs whose driver is gone (store/runs.py), ended at
        their last heartbeat; returns their ids."""
        sql = "SELECT id, host, pid, heartbeat_at, started_at FROM runs WHERE status = 'running'"
        rows = self.reader().query(sql).rows
        dead = [
            (run_id, heartbeat_at or started_at)
            for run_id, host, pid, heartbeat_at, started_at in rows
            if run_state("running", host, pid, heartbeat_at, started_at, now=now) != "running"
        ]
        for run_id, last in dead:
            self.finish_run(run_id, "interrupted", last)
        return [run_id for run_id, _ in dead]

    def reader(self) -> Reader:
        """Reads in this process, through this connection (a second open would conflict)."""
        return Reader(self.con.cursor(), str(self.path))

    def checkpoint(self) -> None:
        self.con.execute("CHECKPOINT")

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
