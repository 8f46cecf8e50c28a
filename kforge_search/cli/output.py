"""How every listing command prints its rows, for a person or for a pipe.

- `table` on a terminal: a rich table, as wide as its cells (wider than the terminal rather
  than wrapping ids); a cell longer than CELL_CHARS is cut with an ellipsis.
- `table` anywhere else (a pipe, a file): tab-separated lines, the header first, every value
  whole: nothing cut, wrapped or padded, so `kforge problems list | grep NAME` finds it.
- `json`: a list with one object per row, keyed by column; numbers stay numbers.
- `csv`: a header and one line per row, as Python's csv module writes (and reads) them.

Lines beside a listing (counts, paths, hints) go through `note`: to stdout under a table on a
terminal, to stderr otherwise, so that what a pipe gets is the rows alone.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "json", "csv")
CELL_CHARS = 60  # on a terminal only

FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        help="table (tab-separated, values whole, when not printing to a terminal), json "
        "(a list of objects) or csv",
    ),
]


def plain(value: Any) -> str:
    """A value as a table shows it by default."""
    if value is None:
        return "-"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(plain(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={plain(v)}" for k, v in value.items()) or "-"
    return str(value)


@dataclass(frozen=True)
class Column:
    """A listing's column: `key` names it in JSON and CSV (and heads the table unless
    `header` does); `show` says how a table shows its values (plain text, or rich Text for
    colour)."""

    key: str
    header: str = ""
    show: Callable[[Any], str | Text] = plain

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("a column needs a key")

    @property
    def title(self) -> str:
        return self.header or self.key


def columns_of(names: Iterable[str | Column]) -> tuple[Column, ...]:
    return tuple(c if isinstance(c, Column) else Column(c) for c in names)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        err = Console(stderr=True)
        err.print(f"[bold red]Error:[/] --format {fmt!r}: use table, json or csv", highlight=False)
        raise typer.Exit(2)
    return fmt


def on_terminal(file: TextIO | None = None) -> bool:
    try:
        return (file or sys.stdout).isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def emit(
    columns: Sequence[str | Column], rows: Iterable[Sequence[Any]], fmt: str = "table", *,
    title: str = "", file: TextIO | None = None,
) -> None:  # fmt: skip
    """Print `rows` (raw values, in the order of `columns`) as `fmt` says (module docstring),
    to `file` (default: stdout)."""
    out = file or sys.stdout
    cols, data = columns_of(columns), [tuple(row) for row in rows]
    for row in data:
        if len(row) != len(cols):
            raise ValueError(f"a row of {len(row)} values for {len(cols)} columns: {row!r}")
    fmt = check_format(fmt)
    if fmt == "json":
        objects = [{c.key: _json_value(v) for c, v in zip(cols, row, strict=True)} for row in data]
        out.write(json.dumps(objects, indent=2, default=str) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.key for c in cols])
        writer.writerows([_csv_value(v) for v in row] for row in data)
    elif on_terminal(out):
        _rich_table(cols, data, title, out)
    else:
        if title:
            note(title, fmt)
        lines = [[c.title for c in cols]]
        lines += [[_text(c.show(v)) for c, v in zip(cols, row, strict=True)] for row in data]
        out.write("".join("\t".join(_one_line(x) for x in line) + "\n" for line in lines))
    out.flush()


def note(message: str, fmt: str = "table") -> None:
    """A line beside a listing (module docstring says where it goes)."""
    if fmt == "table" and on_terminal():
        Console().print(message, highlight=False, soft_wrap=True)
    else:
        Console(stderr=True).print(message, highlight=False, soft_wrap=True)


def _rich_table(
    cols: tuple[Column, ...], data: list[tuple[Any, ...]], title: str, out: TextIO
) -> None:
    cells = [[_cut(c.show(v)) for c, v in zip(cols, row, strict=True)] for row in data]
    table = Table(*(c.title for c in cols), title=title or None, title_justify="left")
    for row in cells:
        table.add_row(*row)
    widths = [
        max([len(c.title), *(len(row[i].plain) for row in cells)]) for i, c in enumerate(cols)
    ]
    needed = sum(widths) + 3 * len(cols) + 1
    console = Console(file=out)
    (console if needed <= console.width else Console(file=out, width=needed)).print(table)


def _cut(shown: str | Text) -> Text:
    text = shown if isinstance(shown, Text) else Text(_one_line(shown))
    if len(text.plain) > CELL_CHARS:
        text = text[: CELL_CHARS - 1] + Text("…")
    return text


def _text(shown: str | Text) -> str:
    return shown.plain if isinstance(shown, Text) else shown


def _one_line(text: str) -> str:
    return " ".join(text.replace("\t", " ").splitlines())


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | tuple | dict):
        return json.dumps(_json_value(value), default=str)
    return _json_value(value)
