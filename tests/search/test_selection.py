"""Parent selection picks verified members only, within one island."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kforge_search.search.selection import (
    NoVerifiedMembers,
    crossover_pair,
    elites,
    rank_pick,
    select_parents,
    tournament,
)
from tests.search.members import member, random_population


def test_never_an_unverified_parent_over_random_populations():
    tempting = 0  # populations where an unverified member beats every verified one
    for seed in range(400):
        rng = random.Random(seed)
        population = random_population(rng, rng.randrange(1, 30), rng.choice([0.0, 0.2, 0.7]))
        good = [m for m in population if m.verified]
        bad = [m for m in population if not m.verified]
        if good and bad and max(m.fitness for m in bad) > max(m.fitness for m in good):
            tempting += 1
        if not good:
            with pytest.raises(NoVerifiedMembers, match="verified parent"):
                tournament(population, rng)
            with pytest.raises(NoVerifiedMembers):
                rank_pick(population, rng)
            with pytest.raises(NoVerifiedMembers):
                select_parents(population, 2, rng, method="rank")
            assert elites(population, 3) == []
            continue
        picks = [
            *select_parents(population, 5, rng, "tournament", tournament_size=rng.randint(1, 6)),
            *select_parents(population, 5, rng, "rank"),
            *elites(population, rng.randint(0, 5)),
        ]
        if len({m.source_hash for m in good}) >= 2:
            picks.extend(crossover_pair(population, rng))
        assert picks, seed
        assert all(m.verified for m in picks), seed
    assert tempting > 50  # the property was tested where a careless selection would fail


def test_elites_are_the_best_distinct_verified():
    population = [
        member("a", 3.0),
        member("b", 9.0, verified=False),
        member("c", 2.0),
        member("c2", 2.5, source="h-a"),  # the same source as "a", slower: a duplicate
        member("d", 1.0),
    ]
    assert [m.candidate_id for m in elites(population, 2)] == ["a", "c"]
    assert [m.candidate_id for m in elites(population, 10)] == ["a", "c", "d"]
    assert elites(population, 0) == []
    with pytest.raises(ValueError, match="k=-1"):
        elites(population, -1)


def test_tournament_of_everyone_is_the_best_and_size_one_is_uniform():
    population = [member(f"m{i}", float(i + 1)) for i in range(5)]
    rng = random.Random(0)
    assert tournament(population, rng, size=5).candidate_id == "m4"
    counts = Counter(tournament(population, rng, size=1).candidate_id for _ in range(2000))
    assert set(counts) == {f"m{i}" for i in range(5)}
    with pytest.raises(ValueError, match="tournament size 0"):
        tournament(population, rng, size=0)


def test_rank_selection_prefers_better_ranks_but_not_by_speedup_gaps():
    population = [member("best", 100.0), member("mid", 1.1), member("low", 1.0)]
    rng = random.Random(1)
    counts = Counter(rank_pick(population, rng).candidate_id for _ in range(6000))
    # weights 3:2:1, whatever the speedups
    assert counts["best"] > counts["mid"] > counts["low"] > 0
    assert 0.4 < counts["best"] / 6000 < 0.6


def test_crossover_pair_prefers_another_lineage():
    population = [
        member("a1", 5.0, lineage="A"),
        member("a2", 4.0, lineage="A"),
        member("b1", 1.0, lineage="B"),
        member("x", 9.0, lineage="C", verified=False),
    ]
    for seed in range(50):
        first, second = crossover_pair(population, random.Random(seed))
        assert first.candidate_id != second.candidate_id
        assert first.lineage_id != second.lineage_id
        assert "x" not in (first.candidate_id, second.candidate_id)
    same_lineage = [member("a1", 5.0, lineage="A"), member("a2", 4.0, lineage="A")]
    assert {m.candidate_id for m in crossover_pair(same_lineage, random.Random(0))} == {
        "a1",
        "a2",
    }
    with pytest.raises(NoVerifiedMembers, match="need 2"):
        crossover_pair([member("a1"), member("dup", source="h-a1")], random.Random(0))


def test_selection_refuses_members_of_two_islands():
    mixed = [member("a", platform="cuda-triton"), member("b", platform="cpu-cpp")]
    with pytest.raises(ValueError, match="within one island"):
        tournament(mixed, random.Random(0))
    with pytest.raises(ValueError, match="within one island"):
        elites([member("a"), member("b", problem="p2")], 1)


def test_select_parents_checks_its_arguments():
    population = [member("a")]
    with pytest.raises(ValueError, match="unknown selection method"):
        select_parents(population, 1, random.Random(0), method="roulette")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n=-1"):
        select_parents(population, -1, random.Random(0))
    assert select_parents(population, 0, random.Random(0)) == []
