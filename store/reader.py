"""Read-only access: a connection opened read-only (or a writer's cursor) and plain queries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from .connection import StoreError, connect
from .schema import check_version


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Reader:
    """Queries over one connection; `Reader.open` opens a file read-only."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str):
        self.con = con
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> Reader:
        con = connect(path, read_only=True)
        try:
            check_version(con, str(path))
        except BaseException:
            con.close()
            raise
        return cls(con, str(path))

    def query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Any SQL; on a read-only open, statements that write fail with a StoreError."""
        try:
            cursor = self.con.execute(sql, params or [])
            columns = tuple(d[0] for d in cursor.description or ())
            return QueryResult(columns, tuple(cursor.fetchall()))
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {exc}") from None

    def arrow(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        try:
            return self.con.execute(sql, params or []).to_arrow_table()
        except duckdb.Error as exc:
            raise StoreError(f"query failed: {exc}") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
