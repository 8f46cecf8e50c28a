"""Agent tests check generated candidates in this process: Triton under its interpreter."""

from __future__ import annotations

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
