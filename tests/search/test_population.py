"""Members, de-duplication by normalized source, islands and references between them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass

import pytest

from kforge_search.evaluator import Status
from kforge_search.evaluator.result import Baseline, EvalResult, TimingStats
from kforge_search.problem import source_hash
from kforge_search.search.population import (
    Member,
    dedupe,
    islands,
    new_sources,
    references_for,
)
from tests.conftest import BROKEN, EXAMPLES
from tests.search.members import member

HONEST = (EXAMPLES / "triton" / "elementwise_chain.py").read_text()
WRONG = (BROKEN / "triton" / "wrong_values.py").read_text()


def _result(status: Status, *, eager: float, compile_: float, p50: float = 1.0) -> EvalResult:
    def base(kind: str, ms: float) -> Baseline:
        return Baseline(kind, True, TimingStats("cuda_events", 50, ms, ms, ms))

    return EvalResult(
        status=status,
        message="",
        stage="done",
        problem_id="p1",
        problem_name="level1/10_elementwise_chain",
        platform="cuda-triton",
        policy="strict",
        candidate_hash=source_hash(HONEST, "cuda-triton"),
        timing=TimingStats("cuda_events", 50, p50, p50, p50),
        baselines=(base("eager", eager), base("compile", compile_)),
        generalizes="yes",
    )


def test_member_from_result_uses_the_faster_baseline():
    m = Member.from_result(_result(Status.OK, eager=3.0, compile_=2.0), HONEST, generation=2)
    assert m.speedup == pytest.approx(2.0)  # vs torch.compile, the faster baseline
    assert m.verified and m.p50_ms == 1.0 and m.generation == 2
    assert m.candidate_id == source_hash(HONEST, "cuda-triton") == m.lineage_id
    assert m.source_hash == source_hash(HONEST)
    failed = dataclasses.replace(_result(Status.OK, eager=3, compile_=2), status=Status.INCORRECT)
    bad = Member.from_result(failed, HONEST)
    assert not bad.verified and bad.speedup is None and bad.p50_ms is None
    not_general = dataclasses.replace(_result(Status.OK, eager=3, compile_=2), generalizes="no")
    assert not Member.from_result(not_general, HONEST).verified


def test_member_checks_itself():
    with pytest.raises(ValueError, match="verified but its status is INCORRECT"):
        member("a", verified=True, status=Status.INCORRECT)
    with pytest.raises(ValueError, match="generation -1"):
        member("a", generation=-1)
    with pytest.raises(ValueError, match="speedup -1"):
        member("a", speedup=-1.0)
    with pytest.raises(ValueError, match="itself as a parent"):
        dataclasses.replace(member("a"), parent_ids=("a",))
    assert member("a", verified=True, status=Status.TIMEOUT).verified  # timeouts don't count
    assert member("a", speedup=None).fitness == 0.0  # cpu-triton: times not meaningful


def test_dedupe_keeps_the_verified_fittest_copy_in_first_position():
    population = [
        member("x1", 1.0, source="h-x", verified=False),
        member("y", 2.0),
        member("x2", 1.5, source="h-x"),
        member("x3", 1.2, source="h-x"),
        member("x-cpu", 1.0, source="h-x", platform="cpu-cpp"),  # another island: kept
    ]
    assert [m.candidate_id for m in dedupe(population)] == ["x2", "y", "x-cpu"]


def test_new_sources_drops_reformatted_and_known_kernels():
    reformatted = "# a comment\n" + HONEST.replace("BLOCK = 2048", "BLOCK   =   2048")
    fresh = new_sources([HONEST, reformatted, WRONG, WRONG], seen=[])
    assert fresh == [HONEST, WRONG]
    assert new_sources([reformatted, WRONG], seen=[source_hash(HONEST)]) == [WRONG]


def test_islands_and_references_between_them():
    population = [
        member("t1", 2.0, platform="cuda-triton"),
        member("t2", 5.0, platform="cuda-triton"),
        member("c1", 1.5, platform="cuda-cpp"),
        member("c2", 9.0, platform="cuda-cpp", verified=False),
        member("o1", 3.0, platform="cpu-cpp"),
    ]
    groups = islands(population)
    assert list(groups) == ["cpu-cpp", "cuda-cpp", "cuda-triton"]
    assert [m.candidate_id for m in groups["cuda-triton"]] == ["t1", "t2"]
    offered = references_for(population, "cuda-triton")
    assert [m.candidate_id for m in offered] == ["o1", "c1"]  # best of each other island
    assert all(m.platform != "cuda-triton" and m.verified for m in offered)
    assert [m.candidate_id for m in references_for(population, "cpu-cpp", 2)] == ["t2", "t1", "c1"]
    assert references_for(population, "cuda-triton", 0) == []


@dataclass(frozen=True)
class _Draft:
    source: str


class _FixedAgent:
    """A test double: proposes the same sources every time."""

    def __init__(self, *sources: str):
        self.sources = sources

    def propose(self, context: object) -> list[_Draft]:
        return [_Draft(s) for s in self.sources]


def test_repeated_drafts_of_an_agent_count_once():
    agent = _FixedAgent(HONEST, HONEST + "\n# same kernel\n", WRONG)
    drafts = agent.propose({"problem": "level1/10_elementwise_chain"})
    assert new_sources(d.source for d in drafts) == [HONEST, WRONG]


def test_the_search_package_imports_neither_ray_nor_torch():
    code = (
        "import sys, kforge_search.search.population, kforge_search.search.selection, "
        "kforge_search.search.lineages, kforge_search.search.budget, "
        "kforge_search.actors.resources; "
        "print(sorted({'ray', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
