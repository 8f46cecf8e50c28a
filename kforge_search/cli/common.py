"""What the `kforge` commands share: the consoles, `Error:` exits with a hint, problem and
platform lookups that fail with one line, and the --sizes / --set options."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console()
err = Console(stderr=True)

SizesOpt = Annotated[
    str | None, typer.Option("--sizes", help="a named size set of the problem (e.g. ci, unseen)")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="override a module-level constant, e.g. --set batch_size=8"),
]


def fail(message: str, hint: str = "", code: int = 2) -> None:
    # one line each, however long (the terminal wraps it): a path in it is not cut, and no
    # wrapped piece of it starts with "Error:" (a database's "IO Error: The file ...")
    err.print(f"[bold red]Error:[/] {message}", highlight=False, soft_wrap=True)
    if hint:
        err.print(f"[dim]Hint:[/] {hint}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            fail(f"--set {item!r} is not NAME=VALUE", "e.g. --set batch_size=8")
        try:
            overrides[name.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            overrides[name.strip()] = raw
    return overrides


def load(problem: str, sizes: str | None, overrides: list[str] | None):
    from kforge_search.problem import ProblemError, resolve_problem

    try:
        return resolve_problem(problem, size_set=sizes, overrides=parse_overrides(overrides))
    except ProblemError as exc:
        fail(str(exc), "`kforge problems list` shows the bundled problems")


def joins_cluster(address: str | None) -> bool:
    """Whether a command's Ray evaluators run on a cluster it joins (--address, else
    RAY_ADDRESS), not on a local one it starts."""
    return bool(address or os.environ.get("RAY_ADDRESS"))


def platform_or_fail(name: str, here: bool = True):
    """The platform, if it can run on this machine; `here` False (a search that joins a
    cluster, whose evaluators run on its nodes): if this tool implements it (the pools
    check their nodes: cli/execute.py)."""
    from kforge_search.platforms import availability, get_platform

    try:
        platform = get_platform(name)
    except ValueError as exc:
        fail(str(exc))
    if not here and platform.runnable:
        return platform
    state = availability(platform)
    if not state.ok:
        fail(
            f"platform {name} cannot run on this machine: {state.reason}", "see `kforge platforms`"
        )
    return platform


def suite_problems(
    suite: str, sizes: str | None, overrides: dict[str, Any], match: str | None
) -> tuple[list[Any], list[str]]:
    """A suite's problems (bundled, a file or a directory) at these sizes, those whose name
    contains `match`, and why others were skipped."""
    from kforge_search.problem import ProblemError, bundled_problems_dir, find_problems

    root = Path(suite)
    for bundled in (bundled_problems_dir() / suite, bundled_problems_dir() / f"{suite}.py"):
        if not root.exists() and bundled.exists():
            root = bundled
    try:
        problems, skipped = find_problems(root)
    except ProblemError as exc:
        fail(str(exc), "give a bundled suite (level1, level2), one of its problems "
             "(level2/01_gemm_bias_relu), a problem file or a directory")  # fmt: skip
    chosen = []
    for p in problems:
        if match and match not in p.name:
            continue
        try:
            chosen.append(p.resized(sizes, overrides))
        except ProblemError as exc:
            skipped.append(f"{p.name}: {exc}")
    return chosen, skipped
