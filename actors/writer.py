"""The database writer as a Ray actor: the one process holding the DuckDB file open.

`WriterActor` is a thin shell over `kforge_search.store.writer.Writer`. It takes no CPU
(it mostly waits), restarts when it dies (`max_restarts=-1`: DuckDB replays its log on the
next open, so no committed batch is lost), and Ray retries a call that was in flight when
it died (`max_task_retries`): safe, because a batch is written in one transaction with
fixed ids and `ON CONFLICT DO NOTHING`, so a retried batch adds nothing. That is the only
retry layer for writes. `BatchedWriter` gathers records on the caller's side and keeps at
most a few batches in flight; a search writes what it has after each lineage step
(`flush`), so a result is in the file when it is printed. `Heartbeat` beats a run's
heartbeat from a daemon thread of the driver (store/runs.py: a run whose beats stop reads
as interrupted).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import ray
from ray.actor import ActorHandle

from kforge_search.actors.resources import writer_options
from kforge_search.store.connection import StoreError
from kforge_search.store.records import Record
from kforge_search.store.runs import HEARTBEAT_S
from kforge_search.store.writer import Writer, WriteReport


class WriterUnavailable(RuntimeError):
    """The writer actor could not open its database file; the message says why."""


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=3)
class WriterActor:
    """Owns the read-write connection to one database file.

    A file that cannot be opened (held by another process) does not fail the constructor:
    every call then raises `WriterUnavailable` with the store's message, which reaches the
    caller intact (a failed constructor reaches it only as text)."""

    def __init__(self, path: str):
        self._writer: Writer | None = None
        self._error = ""
        try:
            self._writer = Writer(path)
        except StoreError as exc:
            self._error = str(exc)

    def _open(self) -> Writer:
        if self._writer is None:
            raise WriterUnavailable(self._error or "the writer was closed")
        return self._writer

    def ping(self) -> int:
        """The actor's process id, once the file is open."""
        self._open()
        return os.getpid()

    def write(self, records: list[Record]) -> WriteReport:
        return self._open().write(records)

    def finish_run(self, run_id: str, status: str) -> None:
        self._open().finish_run(run_id, status)

    def beat(self, run_id: str) -> None:
        self._open().beat(run_id)

    def settle_runs(self) -> list[str]:
        return self._open().settle_runs()

    def close(self) -> None:
        """Close the file; the actor is of no more use (kill it next)."""
        self._open().close()
        self._writer = None


def start_writer(path: str | Path, *, timeout_s: float = 120.0) -> ActorHandle:
    """Start the writer actor on `path` (made absolute here, in the caller's directory) and
    wait until the file is open; a file that cannot be opened raises WriterUnavailable."""
    actor = WriterActor.options(**writer_options(ray.cluster_resources())).remote(
        str(Path(path).resolve())
    )
    try:
        ray.get(actor.ping.remote(), timeout=timeout_s)
    except WriterUnavailable as exc:  # raised in the actor: Ray's wrapper keeps the original
        ray.kill(actor)
        raise WriterUnavailable(str(getattr(exc, "cause", exc))) from None
    except ray.exceptions.GetTimeoutError:
        ray.kill(actor)
        raise WriterUnavailable(
            f"the writer actor for {path} did not start in {timeout_s:g} s: does the "
            "cluster have a node with the kforge_writer resource free (`ray status`)?"
        ) from None
    return actor


class BatchedWriter:
    """Buffers records for a writer actor and sends them in batches of `batch_size`, or
    sooner once the oldest buffered record waited `max_age_s`, with at most
    `max_in_flight` batches unanswered (the caller waits beyond that)."""

    def __init__(
        self,
        actor: ActorHandle,
        batch_size: int = 500,
        max_in_flight: int = 2,
        max_age_s: float = 1.0,
    ):
        if batch_size < 1 or max_in_flight < 1 or max_age_s < 0:
            raise ValueError(
                f"batch_size={batch_size}, max_in_flight={max_in_flight}, "
                f"max_age_s={max_age_s}: need >= 1, >= 1, >= 0"
            )
        self.actor = actor
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.max_age_s = max_age_s
        self._buffer: list[Record] = []
        self._since = 0.0  # when the oldest buffered record came
        self._in_flight: deque[ray.ObjectRef] = deque()
        self.reports: list[WriteReport] = []

    def add(self, records: Iterable[Record]) -> None:
        if not self._buffer:
            self._since = time.monotonic()
        self._buffer.extend(records)
        while len(self._buffer) >= self.batch_size:
            batch, self._buffer = self._buffer[: self.batch_size], self._buffer[self.batch_size :]
            self._send(batch)
        if self._buffer and time.monotonic() - self._since >= self.max_age_s:
            self.send()

    def send(self) -> None:
        """Send what is buffered now, without waiting for it to be written."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._send(batch)

    def _send(self, batch: list[Record]) -> None:
        self._in_flight.append(self.actor.write.remote(batch))
        while len(self._in_flight) > self.max_in_flight:
            self.reports.append(ray.get(self._in_flight.popleft()))  # a WriteError raises

    def flush(self) -> list[WriteReport]:
        """Send what is buffered and wait for every batch; returns all reports so far."""
        self.send()
        while self._in_flight:
            self.reports.append(ray.get(self._in_flight.popleft()))
        return self.reports


class Heartbeat:
    """Beats the heartbeat of the given runs through the writer actor every `every_s`
    seconds, from a daemon thread, until stopped (a `with` block)."""

    def __init__(self, actor: ActorHandle, every_s: float = HEARTBEAT_S):
        self.actor, self.every_s = actor, every_s
        self.runs: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kforge-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            for run_id in list(self.runs):
                with contextlib.suppress(Exception):  # a beat missed is no failure
                    self.actor.beat.remote(run_id)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
