"""Inputs broadcast along some leading dims and not others: a [S, C] table beside [B, S, C]
(a positional embedding), [B, 1, 1, C] beside [B, S, T, C], a [S, 1] column of scales. Each
was `unsupported: broadcast over part of the leading dims`; the first stage now reads such
a leaf expanded to every leading dim (convert._expanded). On Triton's interpreter, verified
as the evaluator does (no torch compute beside the copy), with either operand first."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.agents.builtin.agent import seed_genome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
CPU = get_platform("cpu-triton")

CASES = [  # (forward, input shapes)
    ("return x * y + 0.25", [(5, 7, 9), (7, 9)]),
    ("return y * x", [(7, 9), (5, 7, 9)]),
    ("return x + y", [(5, 7, 9), (1, 7, 9)]),
    ("return torch.relu(x + y) * y", [(4, 6, 5, 9), (4, 1, 1, 9)]),
    ("return x * y", [(5, 7, 9), (7, 1)]),
    ("return x - y", [(3, 5, 7, 9), (5, 1, 9)]),
    ("return torch.softmax(x + y, dim=-1)", [(5, 7, 9), (7, 9)]),
]


def _problem(tmp_path: Path, forward: str, shapes: list[tuple[int, ...]]):
    path = tmp_path / "p.py"
    inputs = "[" + ", ".join(f"torch.randn{s}" for s in shapes) + "]"
    path.write_text(problem_source(forward, inputs))
    return load_problem(path)


@pytest.mark.parametrize(("forward", "shapes"), CASES)
def test_a_leaf_broadcast_along_some_leading_dims_verifies(verify, tmp_path, forward, shapes):
    problem = _problem(tmp_path, forward, shapes)
    plan = AGENT.plan(problem)
    assert not hasattr(plan, "why"), plan
    for genome in (seed_genome(plan, CPU, "strict"), TritonGenome(block_m=16, block_n=64)):
        draft = AGENT.synthesize(problem, CPU, genome, "test")
        assert not hasattr(draft, "message"), draft
        assert ".expand(*lead" in draft.source
        result = verify(draft.source, problem)
        assert result.ok, result.message


def test_an_output_larger_than_every_input_says_why(tmp_path):
    """[5, 7, 1] * [7, 9] is [5, 7, 9]: no input is the tile. Still a clear unsupported."""
    problem = _problem(tmp_path, "return x * y", [(5, 7, 1), (7, 9)])
    draft = AGENT.synthesize(problem, CPU, TritonGenome(block_m=16, block_n=64), "test")
    assert "unsupported: broadcast" in draft.message and "x of shape (5, 7, 1)" in draft.message
