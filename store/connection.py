"""Opening a database file, with DuckDB's lock and missing-file errors made clear.

DuckDB lets one process open a file read-write, and no other process open it at all
meanwhile. `connect` turns the lock IOException into `StoreLockedError`, which names the
holder (when DuckDB says it) and what to do.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import duckdb


class StoreError(RuntimeError):
    """A database that cannot be used as asked; the message says why and what to do."""


class StoreLockedError(StoreError):
    """Another process holds the file (a search's writer, another `kforge` command)."""

    def __init__(self, path: Path, holder: str, pid: int | None):
        self.path, self.holder, self.pid = path, holder, pid
        who = f"process {pid} ({holder})" if pid is not None else "another process"
        super().__init__(
            f"{path} is in use by {who}: DuckDB lets one process write a database file and "
            "no other process open it meanwhile. Wait for that process to finish (or stop "
            f"it{f': kill {pid}' if pid is not None else ''}), then retry; during a search, "
            "read through the search's writer or query an export (`kforge db export`)."
        )

    def __reduce__(self) -> tuple[type, tuple[Path, str, int | None]]:
        return (StoreLockedError, (self.path, self.holder, self.pid))  # picklable across Ray


class StoreMissingError(StoreError):
    """Reading a database that does not exist."""


_LOCK = re.compile(r"Conflicting lock is held in (?P<holder>.+?) \(PID (?P<pid>\d+)\)")


def connect(path: str | Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to `path`; read-only opens need an existing file."""
    file = Path(path)
    if read_only and not file.is_file():
        raise StoreMissingError(
            f"no database at {file}: record results into it with `kforge eval ... --db "
            f"{file}`, import an export with `kforge db import DIR --db {file}`, or pass "
            "--db PATH of an existing database"
        )
    if not read_only:
        file.parent.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(str(file), read_only=read_only)
    except duckdb.IOException as exc:
        match = _LOCK.search(str(exc))
        if match or "lock" in str(exc).lower():
            holder = match["holder"] if match else "unknown"
            pid = int(match["pid"]) if match else None
            raise StoreLockedError(file, holder, pid) from None
        raise StoreError(f"cannot open {file}: {exc}") from None
    except duckdb.ConnectionException as exc:
        raise StoreError(
            f"this process already has {file} open in another mode ({exc}): use one "
            "Writer per process and read through `Writer.reader()`"
        ) from None


def check_writable(path: str | Path) -> None:
    """Raise StoreError (one line: what is wrong and what to do) unless a writer could
    create or open `path`, changing nothing: its folder (or the nearest one that exists)
    takes new files, an existing file can be written, is not held by another process and is
    not newer than this kforge-search."""
    from .schema import LATEST, _too_new, current_version

    file = Path(path)
    if file.is_dir():
        example = file / "kforge.duckdb"
        raise StoreError(f"--db {file} is a folder: give a file path, e.g. --db {example}")
    folder = file.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(f"cannot write the database {file}: {folder} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".kforge-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StoreError(
            f"cannot write the database {file}: no new file can be made in {folder} "
            f"({exc.strerror}); pass a --db in a folder you can write"
        ) from None
    if not file.exists():
        return
    try:
        with open(file, "r+b"):
            pass
    except OSError as exc:
        raise StoreError(
            f"cannot write the database {file} ({exc.strerror}): make it writable, or pass "
            "another --db"
        ) from None
    con = connect(file, read_only=True)  # StoreLockedError when another process holds it
    try:
        if current_version(con) > LATEST:
            raise _too_new(current_version(con))
    except duckdb.Error as exc:
        raise StoreError(f"{file} is not a database kforge-search can use: {exc}") from None
    finally:
        con.close()
