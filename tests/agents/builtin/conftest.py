"""Agent tests check generated candidates in this process: Triton under its interpreter."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kforge_search.problem import Problem
from tests.agents.builtin.harness import Check, check, interpreter_ready

# Import triton.language now, interpreted, before anything (tracing imports torch._dynamo,
# which imports triton) imports it compiled.
INTERPRETED = interpreter_ready()


@pytest.fixture
def verify(tmp_path: Path) -> Callable[..., Check]:
    """check(source, problem) against the reference, in this process."""
    if not INTERPRETED:
        pytest.skip("triton was imported before TRITON_INTERPRET=1: run tests/agents/builtin alone")

    def run(source: str, problem: Problem, policy: str = "strict") -> Check:
        return check(source, problem, tmp_path, policy)

    return run


SLOW_HOME = (Path(__file__).parent, Path(__file__).parents[2] / "search" / "test_suite_bench.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Exhaustive agent and bench tests (marked slow) run only when asked for: `-m slow`, or
    KFORGE_SLOW=1. This hook sees every item; it touches only this folder's and
    search/test_suite_bench.py's."""
    if config.getoption("markexpr") or os.environ.get("KFORGE_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or KFORGE_SLOW=1")
    for item in items:
        path = Path(str(item.fspath))
        mine = path == SLOW_HOME[1] or SLOW_HOME[0] in path.parents
        if mine and "slow" in item.keywords:
            item.add_marker(skip)
