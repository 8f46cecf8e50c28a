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


def test_the_gemm_sum_rewrite_is_closer_to_the_exact_sum_than_the_reference(tmp_path):
    """x @ W.sum(0) with the weight summed in double and the GEMV accumulated in double: on
    torch.rand inputs (no cancellation) its error against a float64 evaluation is below the
    float32 reference's own."""
    import torch

    from kforge_search.problem import exec_problem, resolve_problem
    from tests.agents.builtin.harness import load_candidate

    sizes = {"batch_size": 8, "in_features": 1024, "out_features": 2048}
    problem = resolve_problem("level2/29_gemm_sum_offset", overrides=sizes)
    model_new = load_candidate(source(problem), tmp_path / "gemv.py")
    module = exec_problem(problem)
    torch.manual_seed(0)
    reference = module.Model(*module.get_init_inputs())
    torch.manual_seed(0)
    candidate = model_new(*module.get_init_inputs())
    w, b = reference.linear.weight.double(), reference.linear.bias.double()
    for trial in range(3):
        torch.manual_seed(trial)
        x = module.get_inputs()[0]
        with torch.no_grad():
            exact = (x.double() @ w.T + b).sum(dim=1) - reference.offset
            ours = (candidate(x).double() - exact).abs().max()
            theirs = (reference(x).double() - exact).abs().max()
        assert ours < theirs, (trial, float(ours), float(theirs))
