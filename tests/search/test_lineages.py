"""Forking strong lineages and retiring weak ones."""

from __future__ import annotations

import pytest

from kforge_search.search.lineages import lineage_scores, plan_lineages
from tests.search.members import member


def test_lineage_scores_are_the_best_verified_fitness():
    population = [
        member("a1", 1.0, lineage="A"),
        member("a2", 2.0, lineage="A"),
        member("b1", 9.0, lineage="B", verified=False),
        member("c1", None, lineage="C"),  # verified, times not meaningful
    ]
    assert lineage_scores(population) == {"A": 2.0, "B": None, "C": 0.0}


def test_plan_forks_the_best_and_retires_the_worst():
    plan = plan_lineages({"A": 2.0, "B": 1.0, "C": 3.0, "D": None}, fork=1, retire=2)
    assert plan.fork == ("C",)
    assert plan.retire == ("D", "B")  # no verified member first, then the weakest
    assert plan.keep == ("C", "A")


def test_plan_keeps_min_alive_and_respects_max_alive():
    scores = {"A": 2.0, "B": 1.0, "C": 0.5}
    assert plan_lineages(scores, retire=5, min_alive=2).retire == ("C",)
    assert plan_lineages(scores, fork=2, retire=0, max_alive=4).fork == ("A",)
    assert plan_lineages(scores, fork=2, retire=1, max_alive=4).fork == ("A", "B")
    assert plan_lineages(scores, fork=1, retire=0, max_alive=3).fork == ()


def test_ties_with_the_best_are_never_retired_and_unverified_never_forked():
    assert plan_lineages({"A": 0.0, "B": 0.0, "C": 0.0}, retire=2, min_alive=1).retire == ()
    plan = plan_lineages({"A": None, "B": None}, fork=1, retire=1, min_alive=1)
    assert plan.fork == () and plan.retire == ("B",) and plan.keep == ("A",)


def test_plan_checks_its_bounds():
    with pytest.raises(ValueError, match="min_alive=0"):
        plan_lineages({"A": 1.0}, min_alive=0)
    with pytest.raises(ValueError, match="max_alive=1"):
        plan_lineages({"A": 1.0}, min_alive=2, max_alive=1)
    assert plan_lineages({}) == plan_lineages({}, fork=0)
