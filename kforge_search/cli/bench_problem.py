"""One problem of `kforge bench` (cli/bench.py): its search (search/suite_bench.py), its row
against its baselines, and a progress line per evaluated draft; a problem that cannot be run
gets a row that says why, and the bench goes on."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rich.console import Console

err = Console(stderr=True)


def peaks(platform: Any, device_name: str) -> Any:
    from kforge_search.hardware import platform_peaks

    return platform_peaks(platform, device_name) if platform.timing_meaningful else None


def slowest(parts: Any, most: int | None = None) -> str:
    """`name seconds, ...` of (name, seconds) parts, slowest first (the `most` slowest),
    leaving out those under 0.05 s."""
    ranked = sorted(parts, key=lambda p: -p[1])[:most]
    return ", ".join(f"{name} {s:.1f}" for name, s in ranked if s >= 0.05)


def progress_line(name: str, parent: Any) -> str:
    """One evaluated draft's line in a bench's log: its status, time, slowest phases and note,
    and why it does not count where it failed or where it verified but is not kept (it
    fails the unseen sizes: suite_bench.best_parent)."""
    from rich.markup import escape

    res = parent.result
    ms = f"{res.timing.p50_ms:.4f} ms" if res.ok and res.timing else ""
    where = slowest(res.phases, most=4)
    where = f": {where}" if where else ""
    # a failed draft's why, on the line: a log of a cut-short run is all that is left
    why = "" if res.ok or not res.message else f" — {escape(res.message.splitlines()[0][:160])}"
    if res.ok and res.generalizes == "no":
        unseen = next((w for w in res.warnings if w.startswith("at the unseen sizes")), "")
        why = f" — not kept: {escape(unseen[:200] or 'it fails the unseen sizes')}"
    return (
        f"  {name}: {res.status.value} {ms} ({res.duration_s:.0f} s{where})"
        f" [dim]{escape(parent.draft.note[:90])}[/]{why}"
    )


def bench_problem(
    problem: Any,
    evaluator: Any,
    lent: Any = None,
    *,
    platform: Any,
    policy: str,
    budget: int,
    agent: Any,
    seed: int,
    screen: int,
    log: Console,
) -> tuple[Any, list[Any]]:
    """One problem's search and its bench row (and the parents it evaluated); progress to
    `log`."""

    from kforge_search.agents.builtin.ir import Unsupported
    from kforge_search.search.suite_bench import bench_row, search_problem

    def show(parent: Any, name: str = problem.name) -> None:
        log.print(progress_line(name, parent), highlight=False, soft_wrap=True)

    def show_screen(ranked: list[Any], name: str = problem.name) -> None:
        ran = [s.p50_ms for s in ranked if s.p50_ms is not None]
        fastest = f"fastest {min(ran):.4f} ms, slowest {max(ran):.4f} ms" if ran else ""
        failed = len(ranked) - len(ran)
        log.print(
            f"  {name}: screened {len(ranked)} genomes in-process: {fastest}"
            + (
                f" ({failed} failed: {next(s.error for s in ranked if s.error)[:80]})"
                if failed
                else ""
            ),
            highlight=False,
        )

    def show_reference(ahead: Any, name: str = problem.name) -> None:
        if ahead.reference_s >= REFERENCE_SHOWN_S:
            log.print(reference_line(name, ahead), highlight=False, soft_wrap=True)

    started = time.monotonic()
    try:
        searched = search_problem(
            problem, platform, policy, budget, evaluator, agent, seed,
            on_result=show, screen=screen, on_screen=show_screen, lent=lent,
            on_reference=show_reference,
        )  # fmt: skip
        parents, stop = searched.parents, searched.unsupported
        plan = agent.plan(problem)  # traced once, by the agent (cached there)
        work = None if isinstance(plan, Unsupported) else plan.graph.work
        best = next((p for p in parents if p.result.ok), None)
        baselines = best.result.baselines if best else ()
        if not baselines and not stop:
            ref = evaluator.reference(problem, platform)
            baselines = evaluator.baselines(problem, platform, ref)
        name = next((p.result.device_name for p in parents), "")
        row = bench_row(
            problem, parents, stop, work, peaks(platform, name), baselines, searched.agent_error
        )
    except Exception as exc:  # the problem could not be run: its row says why, the bench goes on
        return unrunnable(problem, exc, time.monotonic() - started), []
    finally:
        # its oracle answers no later problem: its device memory goes now (H200, level 1: the
        # oracles 4 evaluators kept filled the device to 1.6 of 140 GiB free)
        evaluator.close_oracles()
    seconds = round(time.monotonic() - started, 1)
    return dataclasses.replace(row, seconds=seconds, reference_s=searched.reference_s), parents


REFERENCE_SHOWN_S = 1.0  # a reference that took less is not worth a line


def reference_line(name: str, searched: Any) -> str:
    """How long the problem's reference took before its first draft, and on what (its
    child's parts: evaluator/reference.Reference.spent)."""
    shown = slowest(searched.reference_parts)
    return f"  {name}: reference {searched.reference_s:.1f} s before its first draft" + (
        f" ({shown})" if shown else " (read, not computed)"
    )


def unrunnable(problem: Any, exc: Exception, seconds: float) -> Any:
    """The row of a problem whose reference, agent or bench raised; an error that is not the
    reference's or the agent's prints its traceback to stderr (a bug to report)."""
    import traceback

    from kforge_search.problem import DeviceBusy, ProblemError
    from kforge_search.search.suite_bench import (
        AGENT_ERROR,
        BENCH_ERROR,
        DEVICE_BUSY,
        REFERENCE_FAILED,
        AgentError,
        one_line,
        unrunnable_row,
    )

    if isinstance(exc, DeviceBusy):
        return unrunnable_row(problem, DEVICE_BUSY, str(exc), round(seconds, 1))
    if isinstance(exc, ProblemError):
        return unrunnable_row(problem, REFERENCE_FAILED, str(exc), round(seconds, 1))
    if isinstance(exc, AgentError):
        cause = exc.__cause__ or exc
        err.print("".join(traceback.format_exception(cause)), markup=False, highlight=False)
        return unrunnable_row(problem, AGENT_ERROR, str(exc), round(seconds, 1))
    err.print("".join(traceback.format_exception(exc)), markup=False, highlight=False)
    return unrunnable_row(problem, BENCH_ERROR, one_line(exc), round(seconds, 1))
