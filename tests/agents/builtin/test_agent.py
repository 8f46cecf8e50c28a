"""The builtin agent's proposals: a seed first, then mutants of the fastest verified draft."""

from __future__ import annotations

import dataclasses

import pytest

from kforge_search.agents.base import Context, Draft, Parent
from kforge_search.agents.builtin import BuiltinAgent, TritonGenome, seed_genome
from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.agent import (
    FUSE_GENES,
    TAIL_GENES,
    TF32_TILE,
    analyze,
    relevant_genes,
    search_policy,
)
from kforge_search.evaluator.result import Baseline, EvalResult, PeerCheck, Status, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.agents.builtin.patterns import UNSUPPORTED

PROBLEM = resolve_problem("level2/02_gemm_gelu_scale", size_set="ci")
TRITON = get_platform("cpu-triton")


def result(ok: bool, ms: float = 1.0) -> EvalResult:
    timing = TimingStats("perf_counter", 5, ms, ms, ms) if ok else None
    return EvalResult(
        Status.OK if ok else Status.INCORRECT,
        "",
        "done",
        PROBLEM.id,
        PROBLEM.name,
        TRITON.name,
        "strict",
        "h",
        timing=timing,
    )


def parent(draft: Draft, ok: bool, ms: float = 1.0) -> Parent:
    return Parent(draft, result(ok, ms))


def test_first_proposal_is_the_seed_genome():
    (draft,) = BuiltinAgent().propose(Context(PROBLEM, TRITON, "strict"))
    plan = analyze(PROBLEM)
    assert draft.genome == seed_genome(plan, TRITON, "strict")
    assert draft.precision == "tf32x3" and draft.agent == "builtin"
    assert "@triton.jit" in draft.source and "class ModelNew" in draft.source
    assert "seed" in draft.note


def test_loose_policy_seeds_plain_tf32():
    (draft,) = BuiltinAgent().propose(Context(PROBLEM, TRITON, "loose"))
    assert draft.precision == "tf32"


def test_later_proposals_mutate_the_fastest_verified_parent_and_never_repeat():
    agent = BuiltinAgent(drafts_per_call=3)
    (seed,) = BuiltinAgent().propose(Context(PROBLEM, TRITON))
    slow = agent.synthesize(PROBLEM, TRITON, TritonGenome(block_m=32), "slow")
    assert isinstance(slow, Draft)
    parents = (parent(seed, True, 1.0), parent(slow, True, 5.0))
    drafts = agent.propose(Context(PROBLEM, TRITON, parents=parents, budget=5, seed=1))
    assert len(drafts) == 3
    genomes = {d.genome for d in drafts}
    assert len(genomes) == 3 and seed.genome not in genomes and slow.genome not in genomes
    assert all(d.parents and seed.id in d.parents for d in drafts if "mutant" in d.note)
    assert all(d.genome.precision in ("ieee", "tf32x3", "bf16x3") for d in drafts)  # strict


def _with_tf32_peer(p: Parent, passed: bool) -> Parent:
    check = PeerCheck("strict", passed, mismatch="" if passed else "trial 0 output 0: values")
    tf32 = Baseline("eager-tf32", True, p.result.timing, checks=(check,))
    return Parent(p.draft, dataclasses.replace(p.result, baselines=(tf32,)))


def test_under_strict_tf32_is_tried_only_where_pytorchs_tf32_passed_strict():
    agent = BuiltinAgent(drafts_per_call=3)
    (seed,) = BuiltinAgent().propose(Context(PROBLEM, TRITON))
    for passed in (True, False):
        parents = (_with_tf32_peer(parent(seed, True), passed),)
        context = Context(PROBLEM, TRITON, "strict", parents=parents, budget=20, seed=3)
        assert search_policy(context) == ("strict+tf32" if passed else "strict")
        drafts = agent.propose(context)
        tf32 = [d for d in drafts if d.genome.precision in ("tf32", "tf32rn")]
        if passed:  # after the three-dot steps: one tf32 dot, in loose's tf32 tiles
            assert drafts[0].genome.precision in ("tf32x3", "bf16x3")  # they pass strict
            step = next(d for d in drafts if "TF32 passed strict" in d.note)
            tile = {**TF32_TILE, "block_m": seed.genome.block_m}
            tile = dataclasses.replace(seed.genome, precision="tf32rn", **tile)
            assert step.genome == gen.repair(tile, "strict+tf32")
            assert step.parents == (seed.id,) and drafts.index(step) >= 1
        else:
            assert not tf32
        many = BuiltinAgent(drafts_per_call=20).propose(context)
        assert bool([d for d in many if d.genome.precision == "tf32rn"]) == passed
        assert all(d.genome.precision != "tf32" for d in many)  # truncating tf32: not strict
        assert all(d.genome.precision != "bf16" for d in many)  # still strict otherwise
    assert search_policy(Context(PROBLEM, TRITON, "loose")) == "loose"


def test_under_strict_tf32_is_not_tried_where_pytorchs_failed_strict_at_the_unseen_sizes():
    """PyTorch's TF32 passing strict at the problem's sizes and failing it at its unseen
    ones is no peer under strict (evaluator/peers.py): the search keeps to strict's
    precisions, as our own tf32 would fail there too (generalizes "no")."""
    (seed,) = BuiltinAgent().propose(Context(PROBLEM, TRITON))
    p = _with_tf32_peer(parent(seed, True), True)
    (tf32,) = p.result.baselines
    for passed, policy in ((True, "strict+tf32"), (False, "strict")):
        there = PeerCheck("strict", passed, unseen=True)
        checked = dataclasses.replace(tf32, checks=(*tf32.checks, there), unseen="checked")
        q = Parent(p.draft, dataclasses.replace(p.result, baselines=(checked,)))
        assert search_policy(Context(PROBLEM, TRITON, "strict", parents=(q,))) == policy


def test_an_incorrect_draft_is_retried_at_a_more_accurate_precision():
    agent = BuiltinAgent()
    (seed,) = agent.propose(Context(PROBLEM, TRITON))
    (draft,) = agent.propose(Context(PROBLEM, TRITON, parents=(parent(seed, False),)))
    assert draft.genome == dataclasses.replace(seed.genome, precision="ieee", loads="pointer")
    assert "INCORRECT at tf32x3" in draft.note and draft.parents == (seed.id,)
    loose = agent.synthesize(PROBLEM, TRITON, TritonGenome(precision="bf16"), "bf16")
    (fix,) = agent.propose(Context(PROBLEM, TRITON, "loose", parents=(parent(loose, False),)))
    assert fix.genome.precision == "tf32"


def test_without_a_verified_parent_it_explores_around_the_seed():
    agent = BuiltinAgent()
    (seed,) = agent.propose(Context(PROBLEM, TRITON))
    (ieee,) = agent.propose(Context(PROBLEM, TRITON, parents=(parent(seed, False),)))
    failed = (parent(seed, False), parent(ieee, False))
    (draft,) = agent.propose(Context(PROBLEM, TRITON, parents=failed))
    assert draft.genome not in (seed.genome, ieee.genome) and "no verified parent" in draft.note


@pytest.mark.parametrize(
    ("name", "absent"),
    [
        ("level2/02_gemm_gelu_scale", TAIL_GENES | FUSE_GENES),  # epilogue only
        ("level2/17_gemm_groupnorm_swish", FUSE_GENES),  # segmented statistics: second pass
        ("level2/13_gemm_softmax", frozenset()),  # row statistics: fused or second pass
    ],
)
def test_mutants_change_only_genes_that_change_the_kernel(name, absent):
    problem = resolve_problem(name, size_set="ci")
    agent = BuiltinAgent(drafts_per_call=12)
    (seed,) = agent.propose(Context(problem, TRITON))
    assert relevant_genes(agent.plan(problem), seed.genome).isdisjoint(absent)
    parents = (parent(seed, True),)
    drafts = agent.propose(Context(problem, TRITON, parents=parents, budget=12, seed=3))
    changed = {
        f.name
        for d in drafts
        for f in dataclasses.fields(d.genome)
        if getattr(d.genome, f.name) != getattr(seed.genome, f.name)
    }
    assert changed and changed.isdisjoint(absent)


def test_the_budget_caps_the_drafts():
    agent = BuiltinAgent(drafts_per_call=4)
    assert agent.propose(Context(PROBLEM, TRITON, budget=0)) == []
    assert len(agent.propose(Context(PROBLEM, TRITON, budget=2))) == 2


def test_unsupported_problems_get_no_drafts():
    problem, _ = UNSUPPORTED["conv"]
    assert BuiltinAgent().propose(Context(problem, TRITON)) == []


def test_cpp_drafts_carry_the_shared_library():
    (draft,) = BuiltinAgent().propose(Context(PROBLEM, get_platform("cpu-cpp")))
    assert "load_inline" in draft.source and draft.precision == "ieee"


def test_a_parent_that_fails_the_unseen_sizes_is_never_mutated():
    agent = BuiltinAgent(drafts_per_call=6)
    (seed,) = agent.propose(Context(PROBLEM, TRITON))
    fast = agent.synthesize(PROBLEM, TRITON, TritonGenome(block_m=32), "fast but wrong elsewhere")
    unseen_fails = Parent(fast, dataclasses.replace(result(True, 0.5), generalizes="no"))
    parents = (parent(seed, True, 1.0), unseen_fails)
    drafts = agent.propose(Context(PROBLEM, TRITON, parents=parents, budget=6, seed=2))
    assert drafts and all(fast.id not in d.parents for d in drafts)
    assert any(seed.id in d.parents for d in drafts)


def test_once_the_strict_seed_verifies_the_three_dot_schemes_are_tried_next():
    agent = BuiltinAgent()
    (seed,) = agent.propose(Context(PROBLEM, TRITON))
    (bf16x3,) = agent.propose(Context(PROBLEM, TRITON, parents=(parent(seed, True),)))
    assert bf16x3.genome == dataclasses.replace(seed.genome, precision="bf16x3")  # 64-row tiles
    assert bf16x3.precision == "bf16x3" and "_kf_pair" in bf16x3.source
    assert bf16x3.parents == (seed.id,)
    tried = (parent(seed, True), parent(bf16x3, True, 0.5))
    (hand,) = agent.propose(Context(PROBLEM, TRITON, parents=tried))
    assert hand.genome.x3 == "presplit" and hand.genome.block_k <= 32
    assert dataclasses.replace(hand.genome, x3="triton", block_k=seed.genome.block_k) == seed.genome
    assert "_kf_pair" in hand.source
    (after,) = agent.propose(Context(PROBLEM, TRITON, parents=(*tried, parent(hand, True, 0.4))))
    assert "mutant" in after.note or "crossover" in after.note
    (loose,) = agent.propose(Context(PROBLEM, TRITON, "loose"))
    (mutant,) = agent.propose(Context(PROBLEM, TRITON, "loose", parents=(parent(loose, True),)))
    assert mutant.genome.x3 == "triton"  # plain tf32: nothing to split


def test_the_bf16x3_step_widens_full_size_tiles():
    """At the problems' own sizes (128x128 seed tiles) bf16x3 takes 128x256 tiles, 2 stages
    and a partial sum over 8 k blocks (0.75 ms against 0.91 ms on the H100), except where
    the tile is pooled along features (slower there)."""
    from kforge_search.agents.builtin import genome as gen
    from kforge_search.agents.builtin.agent import _three_dot_steps

    problem = resolve_problem("level2/01_gemm_bias_relu")
    plan = BuiltinAgent().plan(problem)
    seed = seed_genome(plan, get_platform("cuda-triton"), "strict")
    bf16x3 = next(g for g, _ in _three_dot_steps(plan, seed) if g.precision == "bf16x3")
    assert (seed.block_m, seed.block_n) == (128, 128)
    assert (bf16x3.block_m, bf16x3.block_n, bf16x3.num_stages, bf16x3.promote) == (128, 256, 2, 8)
    assert bf16x3.smem_bytes <= gen.SMEM_BYTES
    pooled = resolve_problem("level2/15_gemm_avgpool_gelu")  # whole-window tiles: kept
    plan = BuiltinAgent().plan(pooled)
    seed = seed_genome(plan, get_platform("cuda-triton"), "strict")
    bf16x3 = next(g for g, _ in _three_dot_steps(plan, seed) if g.precision == "bf16x3")
    assert bf16x3 == dataclasses.replace(seed, precision="bf16x3")


def _plan_of(tmp_path, forward: str, inputs: str, init: str = ""):
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, inputs, init))
    return BuiltinAgent().plan(load_problem(path))


def test_tiles_anchored_by_nothing_walk_in_memory_order_and_row_passes_take_long_steps(tmp_path):
    cuda = get_platform("cuda-triton")
    chain = seed_genome(
        _plan_of(tmp_path, "return torch.relu(x)", "[torch.rand(8, 64)]"), cuda, "strict"
    )
    assert chain.group_m == 1 and chain.pass_block == TritonGenome().pass_block
    norm = _plan_of(
        tmp_path, "return self.ln(x)", "[torch.rand(4, 96)]", "self.ln = nn.LayerNorm(96)"
    )
    seed = seed_genome(norm, cuda, "strict")
    assert (seed.group_m, seed.pass_block, seed.pass_warps, seed.pass_programs) == (
        1,
        2048,
        8,
        2048,
    )
    gemm = seed_genome(analyze(PROBLEM), cuda, "strict")
    assert gemm.group_m == TritonGenome().group_m  # a GEMM's tiles keep their L2 grouping


def test_a_gemm_of_few_tiles_over_a_long_k_gets_small_tiles_and_k_slices(tmp_path):
    plan = _plan_of(
        tmp_path, "return torch.matmul(x, y)", "[torch.rand(128, 8192), torch.rand(8192, 128)]"
    )
    seed = seed_genome(plan, get_platform("cuda-triton"), "strict")
    tiles = (128 // seed.block_m) * (128 // seed.block_n)
    assert (seed.block_m, seed.block_n) == (64, 64) and seed.split_k == 16
    assert tiles * seed.split_k == 64  # 4 tiles: every slice a program, at most 16 slices
    # under loose: bf16x3 where B, an input stored [K, N], would need a K-major copy for tf32
    # each call; tf32 where B is a weight (made K-major once)
    assert seed_genome(plan, get_platform("cuda-triton"), "loose").precision == "bf16x3"
    weight = _plan_of(tmp_path, "return self.fc(x)", "[torch.rand(128, 8192)]",
                      "self.fc = nn.Linear(8192, 128)")  # fmt: skip
    assert seed_genome(weight, get_platform("cuda-triton"), "loose").precision == "tf32"


def test_a_loose_bf16x3_seed_over_a_long_k_tries_bf16_dots_that_cast_their_tiles_next(tmp_path):
    """Few tiles over a long K under loose (6_Matmul_with_large_K): its bf16x3 seed's next
    step is one bf16 dot in the same tiles, casting each fp32 tile in registers (the inputs
    are the work: read once, not cast per call first); under strict never (not its precision)."""
    from kforge_search.agents.builtin.agent import BF16_TILE_NOTE
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    path = tmp_path / "long_k.py"
    path.write_text(problem_source("return torch.matmul(x, y)",
                                   "[torch.rand(128, 8192), torch.rand(8192, 128)]"))  # fmt: skip
    problem, agent = load_problem(path), BuiltinAgent()
    cuda = get_platform("cuda-triton")
    (seed,) = agent.propose(Context(problem, cuda, "loose"))
    assert seed.genome.precision == "bf16x3" and seed.genome.split_k > 1
    (step,) = agent.propose(Context(problem, cuda, "loose", parents=(parent(seed, True),)))
    assert step.genome == dataclasses.replace(seed.genome, precision="bf16", cast="tile")
    assert step.note == BF16_TILE_NOTE and step.parents == (seed.id,)
    # away from bf16 (a mutant, a cross) the gene goes back to its default: the same kernels
    tf32 = dataclasses.replace(step.genome, precision="tf32")
    assert gen.repair(tf32, "loose") == gen.repair(dataclasses.replace(tf32, cast="call"), "loose")
    assert gen.repair(step.genome, "loose").cast == "tile"
    (strict,) = agent.propose(Context(problem, cuda))
    after = agent.propose(Context(problem, cuda, parents=(parent(strict, True),), budget=6))
    assert after and all(d.genome.precision != "bf16" for d in after)


def test_a_row_pass_without_a_gemm_tries_steps_of_4096_second(tmp_path):
    from kforge_search.agents.builtin.agent import PASS_NOTE
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    path = tmp_path / "p.py"
    path.write_text(problem_source("return torch.log_softmax(x, dim=1)", "[torch.rand(4, 96)]"))
    problem, agent = load_problem(path), BuiltinAgent()
    (seed,) = agent.propose(Context(problem, TRITON))
    assert seed.genome.pass_block == 2048
    (second,) = agent.propose(Context(problem, TRITON, parents=(parent(seed, True),)))
    assert second.genome == dataclasses.replace(seed.genome, pass_block=4096)
    assert second.note == PASS_NOTE and second.parents == (seed.id,)
    (after,) = agent.propose(
        Context(problem, TRITON, parents=(parent(seed, True), parent(second, True)))
    )
    assert "mutant" in after.note or "crossover" in after.note
    # a failed seed: no tuning steps yet (the same genome would fail the same way)
    (retry,) = agent.propose(Context(problem, TRITON, parents=(parent(seed, False),)))
    assert retry.note != PASS_NOTE


@pytest.mark.parametrize("policy", ["strict", "loose"])
def test_a_gemm_whose_k_is_one_step_seeds_exact_products_in_small_tiles(tmp_path, policy):
    """K <= 32 (one k step: 9_Tall_skinny's 32768 x 32 x 32768): the output's store is the
    work, and exact fp32 products in 64 x 64 tiles beat tf32x3's 128 x 128 on the H200."""
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    genomes = {}
    for k in (32, 64):
        path = tmp_path / f"k{k}.py"
        inputs = f"[torch.rand(300, {k}), torch.rand({k}, 300)]"
        path.write_text(problem_source("return torch.matmul(x, y)", inputs))
        genomes[k] = seed_genome(analyze(load_problem(path)), TRITON, policy)
    short, long = genomes[32], genomes[64]
    assert (short.precision, short.block_m, short.block_n, short.block_k) == ("ieee", 64, 64, 32)
    assert short.loads == "pointer" and short.num_warps == 4
    assert long.precision == ("tf32x3" if policy == "strict" else "tf32")


def test_once_the_loose_seed_of_a_gemm_verifies_bf16_operands_are_tried_next():
    """Under loose, what the tolerance admits beyond tf32 (PyTorch's TF32 is the peer of
    record there) before any random mutation; under strict never (not its precision)."""
    agent = BuiltinAgent()
    (seed,) = agent.propose(Context(PROBLEM, TRITON, "loose"))
    assert seed.precision == "tf32"
    (bf16,) = agent.propose(Context(PROBLEM, TRITON, "loose", parents=(parent(seed, True),)))
    # the same M and N tiles, K steps of 64 (bf16 tiles take half the shared memory)
    step = max(seed.genome.block_k, 64)
    assert bf16.genome == dataclasses.replace(seed.genome, precision="bf16", block_k=step)
    assert bf16.genome.smem_bytes <= gen.SMEM_BYTES
    assert bf16.precision == "bf16" and bf16.parents == (seed.id,)
    assert "bf16 operands" in bf16.note
    (strict,) = agent.propose(Context(PROBLEM, TRITON))
    after = agent.propose(Context(PROBLEM, TRITON, parents=(parent(strict, True),), budget=6))
    assert after and all(d.precision != "bf16" for d in after)
