"""Generations: lineages of two problems step together through a real evaluator pool."""

from __future__ import annotations

import pytest

from kforge_search.actors.pool import EvaluatorPool
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.generation import run_generation, sequential
from kforge_search.search.lineage import FUNCTIONAL, OPTIMIZATION, Lineage

CPP = get_platform("cpu-cpp")
CONFIG = EvalConfig(baselines=(), check_unseen=False)
GEMM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
CLAMP = resolve_problem("level2/05_gemm_scale_clamp_min", size_set="ci")


@pytest.mark.usefixtures("ray_cluster")
def test_two_generations_of_three_lineages_through_the_pool():
    agent = BuiltinAgent()
    lineages = [
        Lineage("gemm-a", GEMM, CPP, agent, seed=1),
        Lineage("gemm-b", GEMM, CPP, agent, seed=2),
        Lineage("clamp", CLAMP, CPP, agent, seed=1),
    ]
    with EvaluatorPool(CPP, 1, CONFIG) as pool:
        pool.wait_ready()
        first = run_generation(lineages, pool.evaluate_many, budget=1)
        second = run_generation(lineages, pool.evaluate_many, budget=1)
    assert [s.pass_kind for s in first] == [FUNCTIONAL] * 3
    assert all(len(s.members) == 1 and s.members[0].status is Status.OK for s in first)
    assert {s.members[0].problem_id for s in first} == {GEMM.id, CLAMP.id}
    assert [s.pass_kind for s in second] == [OPTIMIZATION] * 3
    for lineage, step in zip(lineages, second, strict=True):
        (child,) = step.members
        (root,) = lineage.members[:1]
        assert child.parent_ids == (root.candidate_id,) and child.lineage_id == lineage.lineage_id
        assert child.generation == 1 and child.candidate_id != root.candidate_id


def test_lineage_ids_must_be_unique_in_a_generation():
    evaluate_many = sequential(Evaluator(CONFIG), CPP)
    twins = [Lineage("x", GEMM, CPP, BuiltinAgent()), Lineage("x", CLAMP, CPP, BuiltinAgent())]
    with pytest.raises(ValueError, match="unique"):
        run_generation(twins, evaluate_many, budget=1)


def test_sequential_evaluation_in_this_process():
    lineage = Lineage("solo", CLAMP, CPP, BuiltinAgent())
    (step,) = run_generation([lineage], sequential(Evaluator(CONFIG), CPP), budget=1)
    (member,) = step.members
    assert member.verified and member.problem_id == CLAMP.id and step.proposed == 1


@pytest.mark.usefixtures("ray_cluster")
def test_a_search_steps_through_the_pool_without_a_barrier():
    from kforge_search.search.budget import Budget
    from kforge_search.search.engine import Search, SearchConfig

    steps = []
    with EvaluatorPool(CPP, 2, CONFIG) as pool:
        pool.wait_ready()
        evaluations = pool.evaluations()
        assert evaluations.capacity == 2 and evaluations.poll(0) == []  # nothing pending
        config = SearchConfig(lineages=2, generations=2, fork=0, retire=0)
        search = Search(
            [CLAMP, GEMM], [CPP], BuiltinAgent(), {CPP.name: evaluations}, config,
            Budget(max_candidates=20), on_step=lambda lin, step: steps.append(step),
        )  # fmt: skip
        result = search.run()
        assert pool.pending == 0
    assert result.stop == "generations" and result.generations == 2
    assert all(lin.generation == 2 for lin in search.lineages)
    assert len(steps) == 8 and all(m.status is Status.OK for s in steps for m in s.members)
    # the two lineages of a problem start from the same seed genome: evaluated once, shared
    assert sum(s.reused.count(False) for s in steps) == len(
        {m.candidate_id for s in steps for m in s.members}
    )
