"""A lineage grown with the builtin agent and the real evaluator (cpu-cpp, CI sizes)."""

from __future__ import annotations

import pytest

from kforge_search.agents.base import Context, Draft
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.lineage import FUNCTIONAL, OPTIMIZATION, Lineage

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
CPP = get_platform("cpu-cpp")


@pytest.fixture(scope="module")
def evaluate():
    evaluator = Evaluator(EvalConfig(baselines=()))
    return lambda source: evaluator.evaluate_source(source, PROBLEM, CPP)


class Scripted:
    """Proposes the given sources in turn (then nothing), with the builtin note format."""

    name = "scripted"

    def __init__(self, sources: list[str]):
        self.sources = sources
        self.contexts: list[Context] = []

    def propose(self, context: Context) -> list[Draft]:
        self.contexts.append(context)
        n = len(self.contexts) - 1
        if n >= len(self.sources):
            return []
        parents = tuple(p.draft.id for p in context.parents[-1:])
        return [Draft(self.sources[n], CPP.name, self.name, f"draft {n}", parents=parents)]


def test_functional_pass_until_verified_then_optimization_with_parent_links(evaluate):
    lineage = Lineage("L1", PROBLEM, CPP, BuiltinAgent(drafts_per_call=2), seed=1)
    first = lineage.step(evaluate, budget=1)
    assert first.pass_kind == FUNCTIONAL and first.generation == 0
    (seed,) = first.members
    assert seed.status is Status.OK and seed.verified and seed.lineage_id == "L1"
    second = lineage.step(evaluate, budget=2)
    assert second.pass_kind == OPTIMIZATION and len(second.members) == 2
    for member in second.members:
        assert member.generation == 1 and seed.candidate_id in member.parent_ids
    assert lineage.best() is not None and lineage.best().verified
    assert len(lineage.parents) == len(lineage.members) == 3


def test_a_broken_draft_keeps_the_lineage_functional_and_its_result_reaches_the_agent(evaluate):
    (good,) = BuiltinAgent().propose(Context(PROBLEM, CPP))
    broken = good.source.replace("class ModelNew", "class ModelNew(\n", 1)  # rejected: syntax
    agent = Scripted([broken, good.source])
    lineage = Lineage("L2", PROBLEM, CPP, agent)
    (bad,) = lineage.step(evaluate, 1).members
    assert bad.status is Status.REJECTED and not bad.verified
    assert lineage.pass_kind == FUNCTIONAL
    (fixed,) = lineage.step(evaluate, 1).members
    (seen,) = agent.contexts[1].parents  # the failed attempt and its result, for the fix
    assert seen.result.status is Status.REJECTED and seen.draft.source == broken
    assert fixed.verified and fixed.parent_ids == (bad.candidate_id,)
    assert lineage.pass_kind == OPTIMIZATION


def test_sources_already_evaluated_are_not_evaluated_again(evaluate):
    (good,) = BuiltinAgent().propose(Context(PROBLEM, CPP))
    same = good.source + "\n# the same kernel, another comment\n"
    agent = Scripted([good.source, same])
    lineage = Lineage("L3", PROBLEM, CPP, agent)
    lineage.step(evaluate, 1)
    step = lineage.step(evaluate, 1)
    assert step.proposed == 1 and step.repeats == 1 and step.members == ()
    with pytest.raises(ValueError, match="at least one"):
        lineage.step(evaluate, 0)
