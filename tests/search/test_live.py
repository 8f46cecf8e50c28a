"""The search's progress view: a live table on a terminal, lines otherwise."""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console

from kforge_search.cli.live import Progress
from kforge_search.evaluator.result import Status


@dataclass(frozen=True)
class _Member:
    status: Status


@dataclass(frozen=True)
class _Best:
    speedup: float


@dataclass(frozen=True)
class _Step:
    generation: int
    pass_kind: str
    members: tuple
    reused: tuple


class _Lineage:
    def __init__(self, lineage_id: str, best: float | None):
        self.lineage_id, self._best = lineage_id, best

    def best(self):
        return _Best(self._best) if self._best else None


def _steps(progress: Progress) -> None:
    ok, bad = _Member(Status.OK), _Member(Status.INCORRECT)
    progress.step(_Lineage("p@cpu#0", None), _Step(0, "functional", (bad,), (False,)))
    progress.step(_Lineage("p@cpu#1", 1.5), _Step(0, "functional", (ok,), (False,)))
    progress.step(_Lineage("p@cpu#0", 1.5), _Step(1, "functional", (ok,), (True,)), {"p@cpu#1"})


def test_lines_when_not_a_terminal_count_only_fresh_evaluations():
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200), live=False)
    with progress:
        _steps(progress)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("gen 0 p@cpu#0 (functional): INCORRECT  (1 evaluated")
    assert "OK (known); best 1.50x  (2 evaluated" in lines[2]  # a shared result is not counted


def test_live_table_has_a_row_per_lineage_with_its_best_and_retirements():
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200, force_terminal=True), live=True)
    with progress:
        _steps(progress)
    text = out.getvalue()
    assert "p@cpu#0 (retired)" in text and "1.50x" in text
    assert "generation 1: 2 evaluated" in text
