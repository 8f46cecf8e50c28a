"""The builtin agent's proposals: a seed first, then mutants of the fastest verified draft."""

from __future__ import annotations

from kforge_search.agents import BuiltinAgent, Context, Draft, Parent, TritonGenome, seed_genome
from kforge_search.agents.builtin import analyze
from kforge_search.evaluator.result import EvalResult, Status, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.agents.patterns import UNSUPPORTED

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
    assert all(d.genome.precision in ("ieee", "tf32x3") for d in drafts)


def test_without_a_verified_parent_it_explores_around_the_seed():
    (seed,) = BuiltinAgent().propose(Context(PROBLEM, TRITON))
    (draft,) = BuiltinAgent().propose(Context(PROBLEM, TRITON, parents=(parent(seed, False),)))
    assert draft.genome != seed.genome and "no verified parent" in draft.note


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
