"""Export to a directory of Parquet files (one per table) and import it back.

An export holds `<table>.parquet` for every table and `manifest.json` (schema version and
row counts). Import goes through the Writer, so it is idempotent by primary key and redacts
like any other write; importing an export twice adds nothing the second time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

import kforge_search

from .arrow import from_row
from .connection import StoreError
from .reader import Reader
from .records import BY_TABLE
from .schema import LATEST, TABLES, current_version
from .writer import Writer

MANIFEST = "manifest.json"
_CHUNK = 20_000


@dataclass(frozen=True)
class TableCount:
    table: str
    rows: int  # exported, or read from the export
    inserted: int = 0  # on import: new rows (the rest were there already)


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def export_db(reader: Reader, directory: str | Path) -> list[TableCount]:
    """Write every table to `directory/<table>.parquet`, ordered by id, plus a manifest."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    counts = []
    for table in TABLES:
        file = out / f"{table}.parquet"
        reader.query(
            f"COPY (SELECT * FROM {table} ORDER BY id) TO {_sql_path(file)} (FORMAT parquet)"
        )
        counts.append(TableCount(table, pq.read_metadata(file).num_rows))
    manifest = {
        "schema_version": current_version(reader.con),
        "tool_version": kforge_search.__version__,
        "tables": {c.table: c.rows for c in counts},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return counts


def _manifest(directory: Path) -> dict:
    file = directory / MANIFEST
    if not file.is_file():
        raise StoreError(
            f"{directory} is not a kforge export (no {MANIFEST}): make one with "
            "`kforge db export DIR`"
        )
    manifest = json.loads(file.read_text())
    version = manifest.get("schema_version")
    if version != LATEST:
        raise StoreError(
            f"{directory} was exported with schema version {version}; this kforge-search "
            f"imports version {LATEST} only: export it again with a matching kforge-search"
        )
    return manifest


def import_db(writer: Writer, directory: str | Path) -> list[TableCount]:
    """Insert every table of an export; rows already present (same id) are skipped."""
    src = Path(directory)
    manifest = _manifest(src)
    counts = []
    for table in TABLES:
        file = src / f"{table}.parquet"
        if not file.is_file():
            if manifest["tables"].get(table, 0):
                raise StoreError(f"{file} is missing but the manifest lists rows for it")
            continue
        cls = BY_TABLE[table]
        rows = inserted = 0
        for batch in pq.ParquetFile(file).iter_batches(batch_size=_CHUNK):
            records = [from_row(cls, row) for row in batch.to_pylist()]
            inserted += writer.write(records).total_inserted
            rows += len(records)
        counts.append(TableCount(table, rows, inserted))
    return counts
