"""Genomes: what each policy admits, mutation and crossover, repair."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kforge_search.agents.builtin import genome as gen
from kforge_search.agents.builtin.genome import (
    CPP_SPACE,
    TRITON_SPACE,
    CppGenome,
    TritonGenome,
    admissible_precisions,
    crossover,
    more_accurate,
    mutate,
    repair,
)


def test_policies_decide_the_admissible_precisions():
    assert admissible_precisions("strict") == ("ieee", "tf32x3", "bf16x3")
    # where PyTorch's TF32 passed strict on the problem's trials (agent.search_policy)
    assert admissible_precisions("strict+tf32") == ("ieee", "tf32x3", "bf16x3", "tf32rn")
    assert admissible_precisions("loose+tf32") == admissible_precisions("loose")
    assert set(admissible_precisions("loose")) == {"ieee", "tf32x3", "bf16x3", "tf32", "bf16"}
    with pytest.raises(ValueError, match="unknown policy"):
        admissible_precisions("sloppy")


def test_mutation_under_strict_never_picks_tf32_or_bf16():
    rng = random.Random(0)
    genome = TritonGenome()
    for _ in range(200):
        genome = mutate(genome, "strict", rng, genes=2)
        assert genome.precision in ("ieee", "tf32x3", "bf16x3")  # three-dot or fp32 only


def test_repair_moves_a_loose_precision_into_the_strict_set():
    assert repair(TritonGenome(precision="tf32"), "strict").precision == "tf32x3"


def test_repair_fits_the_pipelined_tiles_in_shared_memory():
    big = TritonGenome(block_m=256, block_n=256, block_k=128, num_stages=5)
    fixed = repair(big, "strict")
    assert fixed.smem_bytes <= 200 * 1024


def test_mutation_is_deterministic_per_seed_and_changes_something():
    a = mutate(TritonGenome(), "loose", random.Random(7))
    b = mutate(TritonGenome(), "loose", random.Random(7))
    assert a == b and a != TritonGenome()


def test_mutants_stay_in_the_space():
    rng = random.Random(1)
    for genome, space in ((TritonGenome(), TRITON_SPACE), (CppGenome(), CPP_SPACE)):
        for _ in range(50):
            genome = mutate(genome, "loose", rng)
            for name, values in space.items():
                default = getattr(type(genome)(), name)
                assert getattr(genome, name) in values or getattr(genome, name) == default


def test_crossover_takes_each_gene_from_a_parent():
    a = TritonGenome(block_m=64, num_warps=4, split_k=2)
    b = TritonGenome(block_m=256, num_warps=8, placement="second_pass")
    child = crossover(a, b, "strict", random.Random(3))
    for field in dataclasses.fields(child):
        assert getattr(child, field.name) in (getattr(a, field.name), getattr(b, field.name))


def test_crossover_of_two_backends_is_refused():
    with pytest.raises(ValueError, match="crossover"):
        crossover(TritonGenome(), CppGenome(), "strict", random.Random(0))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TritonGenome(block_m=100), "block_m=100"),
        (lambda: TritonGenome(precision="fp8"), "precision='fp8'"),
        (lambda: TritonGenome(placement="everywhere"), "placement='everywhere'"),
        (lambda: CppGenome(block_n=40), "block_n=40"),
    ],
)
def test_invalid_genomes_name_the_gene(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_more_accurate_steps_up_within_the_policy():
    assert more_accurate(TritonGenome(precision="bf16"), "loose").precision == "tf32"
    assert more_accurate(TritonGenome(precision="tf32x3"), "strict").precision == "ieee"
    assert more_accurate(TritonGenome(precision="ieee"), "strict") is None
    assert more_accurate(CppGenome(), "strict") is None


def test_an_ieee_dot_loads_its_tiles_with_pointers():
    tma = TritonGenome(precision="ieee", loads="tma")
    assert gen.repair(tma, "strict").loads == "pointer"  # TMA + FMA dot: 191 vs 5.8 ms, H100
    assert gen.more_accurate(dataclasses.replace(tma, precision="tf32x3"), "strict") == (
        dataclasses.replace(tma, loads="pointer")
    )
    assert gen.repair(TritonGenome(precision="tf32x3", loads="tma"), "strict").loads == "tma"


def test_mutate_among_keeps_the_other_genes():
    rng = random.Random(0)
    base = TritonGenome()
    for _ in range(30):
        child = mutate(base, "loose", rng, genes=2, among=frozenset({"block_k", "num_stages"}))
        assert dataclasses.replace(child, block_k=32, num_stages=3) == base


@pytest.mark.parametrize("cpp", [False, True])
def test_a_described_genome_reads_back_as_the_same_genome(cpp):
    start = gen.CppGenome() if cpp else gen.TritonGenome()
    rng = random.Random(7)
    for _ in range(20):
        genome = gen.mutate(start, "loose", rng, genes=3)
        assert gen.from_description(gen.describe(genome), cpp=cpp) == genome
    assert gen.from_description("block_m=12x", cpp=cpp) is None
    assert gen.from_description("no_such_gene=4", cpp=cpp) is None
    assert gen.from_description("not a genome", cpp=cpp) is None
