"""Flat tiles for elementwise programs (genome.FLAT_SPACE): a program with no GEMM, window,
pooling or statistic is seeded with 1 x 1024 tiles (H200, 19_ReLU at 6 GiB: 3.04 ms against
16 x 256's 3.11 and torch.compile's 3.035), its mutants stay flat, and rows shorter than the
tile take more rows per tile at run time (render_triton: as many elements per program).
Checked on Triton's interpreter with short rows, broadcasting and a non-contiguous input."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.agent import elementwise_only, seed_genome
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import load_candidate
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
CUDA = get_platform("cuda-triton")


def _problem(tmp_path: Path, forward: str, inputs: str):
    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, inputs))
    return load_problem(path)


@pytest.mark.parametrize(
    ("forward", "flat"),
    [
        ("return torch.relu(x) * 2.0", True),
        ("return torch.sum(x, dim=1)", False),
        ("return torch.softmax(x, dim=1)", False),
        ("return torch.cumsum(x, dim=1)", False),
        ("return x / torch.norm(x)", False),
    ],
)
def test_only_elementwise_programs_get_a_flat_seed(tmp_path, forward, flat):
    problem = _problem(tmp_path, forward, "[torch.randn(33, 257)]")
    plan = AGENT.plan(problem)
    seed = seed_genome(plan, CUDA, "strict")
    assert elementwise_only(plan) is flat
    assert gen.flat(seed) is flat
    if flat:
        assert (seed.block_m, seed.block_n, seed.num_warps) == (1, 1024, 4)


def test_a_matmul_seed_is_not_flat(tmp_path):
    problem = _problem(
        tmp_path, "return torch.matmul(x, y)", "[torch.randn(64, 96), torch.randn(96, 80)]"
    )
    plan = AGENT.plan(problem)
    assert not elementwise_only(plan)
    assert not gen.flat(seed_genome(plan, CUDA, "loose"))


def test_mutants_of_a_flat_genome_stay_flat():
    rng = random.Random(3)
    genome = TritonGenome(block_m=1, block_n=1024, num_warps=4, group_m=1)
    seen = set()
    for _ in range(200):
        genome = gen.mutate(
            genome, "strict", rng, genes=2, among=frozenset({"block_m", "block_n", "num_warps"})
        )
        assert gen.flat(genome), genome
        assert genome.block_m in gen.FLAT_SPACE["block_m"]
        assert genome.block_n in gen.FLAT_SPACE["block_n"]
        seen.add((genome.block_m, genome.block_n))
    assert len(seen) > 8  # the flat tiles are explored, not one of them


def test_a_gemm_tile_is_not_flat():
    assert not gen.flat(TritonGenome())
    assert gen.flat(TritonGenome(block_m=16, block_n=512))
    with pytest.raises(ValueError):
        TritonGenome(block_m=1, block_n=8192)


CASES = [  # (forward, inputs, what to pass the model)
    ("return torch.sigmoid(x) * 3.0 - 1.0", "[torch.randn(37, 3)]", None),  # rows of 3
    ("return x * y + 0.25", "[torch.randn(5, 7, 9), torch.randn(5, 1, 9)]", None),  # broadcast
    ("return torch.tanh(x) + x", "[torch.randn(3, 2051)]", None),  # a long odd row
    ("return F.gelu(x)", "[torch.randn(11, 13, 17)]", "transposed"),  # non-contiguous
]


@pytest.mark.parametrize(("forward", "inputs", "how"), CASES)
@pytest.mark.parametrize(("block_m", "block_n"), [(1, 1024), (8, 512), (4, 4096)])
def test_flat_tiles_compute_the_program(verify, tmp_path, forward, inputs, how, block_m, block_n):
    problem = _problem(tmp_path, forward, inputs)
    plan = AGENT.plan(problem)
    assert elementwise_only(plan)
    genome = dataclasses.replace(
        seed_genome(plan, get_platform("cpu-triton"), "strict"), block_m=block_m, block_n=block_n
    )
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    assert "fbm0" in draft.source  # the tile's rows follow the row length at run time
    result = verify(draft.source, problem)
    assert result.ok, result.message
    if how == "transposed":
        model = load_candidate(draft.source, tmp_path / "candidate.py")()
        x = torch.randn(17, 13, 11).transpose(0, 2)
        assert not x.is_contiguous()
        torch.testing.assert_close(model(x), torch.nn.functional.gelu(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "genome", [TritonGenome(block_m=16, block_n=64), TritonGenome(block_m=1, block_n=1024)]
)
def test_an_input_broadcast_along_the_last_leading_dim(verify, tmp_path, genome):
    """y [B, 1, C] beside x [B, D, C] is per column of each batch (Kind.BCOL): its row is the
    batch, row // D. BR was every row (R) unless a column statistic was batched, and all rows
    read batch 0 of y (max abs err 7.9 before render.rows_per_batch)."""
    problem = _problem(
        tmp_path, "return x * y + 0.25", "[torch.randn(5, 7, 9), torch.randn(5, 1, 9)]"
    )
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    result = verify(draft.source, problem)
    assert result.ok, result.message
