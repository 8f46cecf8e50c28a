"""The search's progress: a live table on a terminal, one line per lineage step otherwise.

One row per lineage: its pass (functional or optimization), what its last step's
candidates did (or why it had none: its LLM call failed, and how), its best verified speedup
so far and how many kernels it has evaluated; the caption has the generation, the
evaluations so far and the evaluations per minute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text


@dataclass
class _Row:
    pass_kind: str = ""
    last: str = ""
    best: float | None = None
    evaluated: int = 0
    alive: bool = True


class Progress:
    def __init__(self, console: Console, live: bool | None = None):
        self.console = console
        self.started = time.monotonic()
        self.rows: dict[str, _Row] = {}
        self.evaluated = 0
        self.generation = 0
        use_live = console.is_terminal if live is None else live
        self.live = Live(self.table(), console=console, auto_refresh=False) if use_live else None

    def __enter__(self) -> Progress:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    @property
    def rate(self) -> float:
        return self.evaluated / max(1e-9, (time.monotonic() - self.started) / 60)

    def step(self, lineage: Any, step: Any, alive: set[str] | None = None) -> None:
        """Take in one lineage step (the search's on_step)."""
        fresh = sum(1 for again in step.reused if not again)
        self.evaluated += fresh
        self.generation = max(self.generation, step.generation)
        row = self.rows.setdefault(lineage.lineage_id, _Row())
        row.pass_kind = step.pass_kind
        row.last = ", ".join(
            m.status.value + (" (known)" if again else "")
            for m, again in zip(step.members, step.reused, strict=True)
        ) or getattr(step, "failure", "")  # a lineage whose LLM calls failed says why
        best = lineage.best()
        row.best = best.speedup if best is not None else None
        row.evaluated += len(step.members)
        if alive is not None:
            for lineage_id, r in self.rows.items():
                r.alive = lineage_id in alive
        if self.live is not None:
            self.live.update(self.table(), refresh=True)
        else:
            self.console.print(
                f"gen {step.generation} {lineage.lineage_id} ({step.pass_kind}): {row.last}"
                + (f"; best {row.best:.2f}x" if row.best else "")
                + f"  ({self.evaluated} evaluated, {self.rate:.1f}/min)",
                highlight=False,
                markup=False,  # a provider's error text may hold brackets
            )

    def table(self) -> Table:
        table = Table(
            "lineage", "pass", "last step", "best so far", "kernels",
            caption=f"generation {self.generation}: {self.evaluated} evaluated, "
            f"{self.rate:.1f} evaluations/min",
        )  # fmt: skip
        for lineage_id, row in self.rows.items():
            table.add_row(
                lineage_id + ("" if row.alive else " (retired)"),
                row.pass_kind,
                Text(row.last),
                f"{row.best:.2f}x" if row.best else "-",
                str(row.evaluated),
            )
        return table
