"""Records <-> Arrow tables. Column types follow the records' annotations.

Every text and blob value passes through the Redactor on its way in, so the database
never holds anything that looks like an API key.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from .records import Record
from .secrets import Redactor

_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    bytes: pa.binary(),
    datetime: pa.timestamp("us"),
}


def _arrow_type(hint: Any) -> pa.DataType:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if hint in _SCALARS:
        return _SCALARS[hint]
    if typing.get_origin(hint) is tuple and args[-1:] == [Ellipsis]:
        item = pa.float32() if args[0] is float else _SCALARS[args[0]]
        return pa.list_(item)
    if len(args) == 1 and args[0] in _SCALARS:  # X | None
        return _SCALARS[args[0]]
    raise TypeError(f"no Arrow type for the annotation {hint!r}: add it to store/arrow.py")


@functools.cache
def arrow_schema(cls: type[Record]) -> pa.Schema:
    hints = typing.get_type_hints(cls)
    return pa.schema([(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(cls)])


def _redact_column(values: list[Any], kind: pa.DataType, redactor: Redactor) -> list[Any]:
    if kind == pa.string():
        return [redactor.text(v) if v else v for v in values]
    if kind == pa.binary():
        return [redactor.blob(v) if v else v for v in values]
    if kind == pa.list_(pa.string()):
        return [[redactor.text(s) for s in v] if v else v for v in values]
    return values


def to_arrow(records: Sequence[Record], redactor: Redactor) -> pa.Table:
    """One table's records (all of one class) as an Arrow table, secrets masked."""
    cls = type(records[0])
    schema = arrow_schema(cls)
    columns = []
    for column in schema:
        values = [getattr(r, column.name) for r in records]
        columns.append(pa.array(_redact_column(values, column.type, redactor), column.type))
    return pa.Table.from_arrays(columns, schema=schema)


def from_row(cls: type[Record], row: Mapping[str, Any]) -> Record:
    """A record from a row read back (lists become tuples); unknown columns are an error."""
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(row) - names)
    if extra:
        raise ValueError(f"columns {extra} are not fields of {cls.__name__}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    return cls(**values)
