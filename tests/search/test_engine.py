"""The search loop in one process: two problems on cpu-cpp with the builtin agent."""

from __future__ import annotations

import dataclasses

import pytest

from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator
from kforge_search.evaluator.result import Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.budget import Budget
from kforge_search.search.engine import Search, SearchConfig
from kforge_search.search.generation import sequential
from kforge_search.search.winners import remeasure

CPP = get_platform("cpu-cpp")
PROBLEMS = [
    resolve_problem("level2/01_gemm_bias_relu", size_set="ci"),
    resolve_problem("level2/05_gemm_scale_clamp_min", size_set="ci"),
]


def test_search_forks_within_the_candidate_budget_and_stops_with_the_reason():
    evaluate_many = sequential(Evaluator(EvalConfig(baselines=("eager",), check_unseen=False)), CPP)
    steps = []
    search = Search(
        PROBLEMS,
        [CPP],
        BuiltinAgent(),
        {CPP.name: evaluate_many},
        SearchConfig(lineages=2, generations=3, max_alive=3),
        Budget(max_candidates=7),
        on_step=lambda lineage, step: steps.append((lineage.lineage_id, step)),
    )
    result = search.run()
    assert result.generations == 2
    assert result.stop == "budget exhausted: max_candidates used 7 of 7"
    assert sum(step.reused.count(False) for _, step in steps) == 7  # evaluations run
    # both lineages of a problem start from the seed genome: evaluated once, shared
    assert [step.reused for _, step in steps[:4]] == [(False,), (True,), (False,), (True,)]
    assert {key[0] for key in result.best} == {p.id for p in PROBLEMS}
    assert all(m.verified and m.speedup for m in result.best.values())
    # a fork starts from its parent lineage's best member, and continues from it
    assert result.forked
    by_id = {lin.lineage_id: lin for lin in search.lineages}
    for lineage_id in result.forked:
        start = by_id[lineage_id].members[0]
        assert start.verified and any(
            m.candidate_id == start.candidate_id
            for lin in search.lineages
            if lin.lineage_id != lineage_id
            for m in lin.members
        )
    # selection never builds on an unverified parent
    known = {m.candidate_id: m for m in result.members}
    assert all(known[p].verified for m in result.members for p in m.parent_ids)
    # the winners are evaluated again, independently, before they are reported
    winners = remeasure(search.lineages, {CPP.name: evaluate_many})
    assert [(w.problem.id, w.platform) for w in winners] == sorted(result.best)
    for w in winners:
        assert w.member.candidate_id == result.best[(w.problem.id, w.platform)].candidate_id
        assert w.again.candidate_hash == w.member.candidate_id
        assert w.confirmed and w.measured_again.p50_ms and w.measured_again.speedup
    # a winner that fails its second evaluation is reported as not confirmed

    def fails_again(requests):
        for key, result in evaluate_many(requests):
            yield key, dataclasses.replace(result, status=Status.INCORRECT)

    assert not any(w.confirmed for w in remeasure(search.lineages, {CPP.name: fails_again}))


def test_a_platform_without_an_evaluator_is_refused():
    with pytest.raises(ValueError, match="no evaluator"):
        Search(PROBLEMS, [CPP], BuiltinAgent(), {}, SearchConfig(), Budget(max_candidates=1))


class _NeverRight:
    """Writes a new module each step that the static check rejects (no kernel)."""

    name = "never-right"

    def __init__(self) -> None:
        self.calls = 0

    def supports(self, problem, platform):
        from kforge_search.agents.base import Support

        return Support(True)

    def propose(self, context):
        from kforge_search.agents.base import Draft

        self.calls += 1
        source = f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    n = {self.calls}\n"
        return [Draft(source, context.platform.name, self.name, "attempt")]


def test_a_lineage_that_never_verifies_gives_up_after_its_functional_passes():
    evaluate_many = sequential(Evaluator(EvalConfig(baselines=(), check_unseen=False)), CPP)
    agent = _NeverRight()
    search = Search(
        PROBLEMS[:1],
        [CPP],
        agent,
        {CPP.name: evaluate_many},
        SearchConfig(lineages=1, generations=6, functional_passes=2),
        Budget(max_candidates=10),
    )
    result = search.run()
    assert agent.calls == 2 and len(result.members) == 2  # no third attempt
    assert all(m.status == "REJECTED" for m in result.members)
    (lineage,) = result.gave_up
    assert result.retired == (lineage,) and not search.alive
    with pytest.raises(ValueError, match="functional_passes=0"):
        SearchConfig(functional_passes=0)


class _Raises(_NeverRight):
    """Raises on one problem (a bug of the agent's), writes rejected modules on the others."""

    def propose(self, context):
        if context.problem.id == PROBLEMS[0].id:
            raise KeyError("a template the agent lost")
        return super().propose(context)


def test_an_agent_that_raises_retires_its_lineage_and_the_search_goes_on():
    evaluate_many = sequential(Evaluator(EvalConfig(baselines=(), check_unseen=False)), CPP)
    steps = []
    search = Search(
        PROBLEMS,
        [CPP],
        _Raises(),
        {CPP.name: evaluate_many},
        SearchConfig(lineages=1, generations=2, functional_passes=5),
        Budget(max_candidates=10),
        on_step=lambda lineage, step: steps.append(step),
    )
    result = search.run()
    (raised,) = [s for s in steps if s.agent_error]
    assert raised.agent_error == "KeyError: 'a template the agent lost'" and not raised.members
    assert raised.failure == "no draft: the agent raised KeyError: 'a template the agent lost'"
    ((lineage, error),) = result.agent_errors
    assert lineage.startswith(PROBLEMS[0].name) and error == raised.agent_error
    assert lineage in result.retired and not result.gave_up
    # the other problem's lineage went on: one evaluation in each of the two generations
    assert [m.problem_id for m in result.members] == [PROBLEMS[1].id] * 2
