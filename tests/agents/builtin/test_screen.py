"""Screening: genomes around the seed, timed in this process, fastest first."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kforge_search.agents.base import Draft
from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import relevant_genes, seed_genome
from kforge_search.agents.builtin.screen import neighbourhood, screen, screened_drafts
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
CPP = get_platform("cpu-cpp")


def changed(a, b) -> set[str]:
    return {f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}


def test_neighbourhood_is_the_seed_then_relevant_changes_without_repeats():
    agent = BuiltinAgent()
    plan = agent.plan(PROBLEM)
    seed = seed_genome(plan, get_platform("cuda-triton"), "strict")
    among = relevant_genes(plan, seed)
    genomes = neighbourhood(seed, among, "strict", 40, random.Random(0))
    assert genomes[0] == seed and len(genomes) == len(set(genomes)) == 40
    assert all(changed(seed, g) <= among | {"num_stages", "block_k", "num_warps"} for g in genomes)
    assert all(g.precision in ("ieee", "tf32x3", "bf16x3") for g in genomes)  # strict
    few = neighbourhood(TritonGenome(), frozenset({"group_m"}), "strict", 100, random.Random(0))
    assert {g.group_m for g in few} == {1, 4, 8, 16} and len(few) == 4


class Breaking(BuiltinAgent):
    """Writes a source that fails at import for one genome."""

    def __init__(self, broken: CppGenome):
        super().__init__()
        self.broken = broken

    def synthesize(self, problem, platform, genome, note, parents=()):
        draft = super().synthesize(problem, platform, genome, note, parents)
        if genome == self.broken:
            return dataclasses.replace(draft, source="raise RuntimeError('boom')\n")
        return draft


def test_screen_times_each_genome_in_process_and_ranks_failures_last():
    broken = CppGenome(block_m=32)
    genomes = [CppGenome(), broken, CppGenome(block_n=128), CppGenome(parallel_work=1 << 17)]
    ranked = screen(Breaking(broken), PROBLEM, CPP, genomes, runs=3, warmup=1)
    assert {s.genome for s in ranked} == set(genomes)
    times = [s.p50_ms for s in ranked[:-1]]
    assert all(t is not None and t > 0 for t in times) and times == sorted(times)
    assert ranked[-1].genome == broken and ranked[-1].p50_ms is None
    assert "RuntimeError at import: boom" in ranked[-1].error


def test_screened_drafts_are_the_fastest_that_ran():
    drafts, ranked = screened_drafts(BuiltinAgent(), PROBLEM, CPP, "strict", 3, 2)
    assert len(ranked) == 3 and len(drafts) == 2
    assert [d.genome for d in drafts] == [s.genome for s in ranked[:2]]
    assert all(isinstance(d, Draft) and "screened" in d.note for d in drafts)


def test_untimed_platforms_are_not_screened():
    with pytest.raises(ValueError, match="not meaningful"):
        screen(BuiltinAgent(), PROBLEM, get_platform("cpu-triton"), [TritonGenome()])
