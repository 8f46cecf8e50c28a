"""Generated C++ candidates (one shared library build) verify in this process."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome
from kforge_search.agents.builtin.render_cpp import library_source
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems
from tests.agents.builtin.patterns import SUPPORTED
from tests.conftest import PROBLEMS

LEVEL2, _ = find_problems(PROBLEMS / "level2")
AGENT = BuiltinAgent()
PLATFORM = get_platform("cpu-cpp")


def source(problem, genome=None):
    return AGENT.synthesize(problem, PLATFORM, genome or CppGenome(), "test").source


@pytest.mark.parametrize("sizes", ["ci", "unseen"])
@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_level2_verifies(verify, problem, sizes):
    sized = problem.resized(sizes)
    result = verify(source(sized), sized)
    assert result.ok, result.message


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_patterns_verify(verify, name):
    result = verify(source(SUPPORTED[name]), SUPPORTED[name])
    assert result.ok, result.message


def test_small_tiles_threads_and_the_untransposed_weight(verify):
    genome = CppGenome(block_m=16, block_n=32, block_k=64, parallel_work=1, weight_layout="nk")
    for name in ("maxpool3", "row_stats", "group_norm_f", "three_gemms_norm", "bmm_inputs"):
        result = verify(source(SUPPORTED[name], genome), SUPPORTED[name])
        assert result.ok, f"{name}: {result.message}"


def test_every_problem_shares_one_library_build():
    sources = {source(p.resized("ci")) for p in LEVEL2[:3]}
    assert all(library_source() in s for s in sources)
    assert "load_inline(" in next(iter(sources)) and "cuda_sources" not in next(iter(sources))
