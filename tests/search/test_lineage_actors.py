"""Lineages in Ray actors (actors/lineage.py) on the session's real local cluster: the same
search as in the driver, step for step, also when a lineage actor is killed mid-search."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.search.budget import Budget
from kforge_search.search.engine import Search, SearchConfig
from kforge_search.search.generation import sequential

pytestmark = pytest.mark.usefixtures("ray_cluster")

CPP = get_platform("cpu-cpp")
PROBLEM = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")


def _search(make_lineage, evaluate_many, on_step=None) -> Search:
    # one step in flight at a time: lineage actors propose in threads, and with several
    # steps in flight the order their proposals end in (and so what the search does next)
    # would be the threads'; one at a time, both searches take the same steps
    config = SearchConfig(lineages=2, generations=3, max_alive=3, in_flight_per_evaluator=1)
    return Search(
        [PROBLEM], [CPP], BuiltinAgent(), {CPP.name: evaluate_many}, config,
        Budget(max_candidates=6), on_step=on_step, make_lineage=make_lineage,
    )  # fmt: skip


def test_lineage_actors_search_as_the_driver_does_and_survive_a_killed_actor():
    import ray

    from kforge_search.actors.lineage import RemoteLineage
    from kforge_search.search.lineage import Lineage

    evaluate = sequential(Evaluator(EvalConfig(baselines=("eager",), check_unseen=False)), CPP)
    cache: dict[str, object] = {}

    def cached(requests):  # the second search sees the first one's results: same decisions
        for r in requests:
            if r.source not in cache:
                cache[r.source] = dict(evaluate([r]))[r.key]
            yield r.key, cache[r.source]

    local = _search(Lineage, cached)
    local.run()
    killed = []

    def kill_once(lineage, step):
        if not killed and lineage.members:
            killed.append(lineage.lineage_id)
            ray.kill(lineage.actor, no_restart=False)  # Ray restarts it, empty

    remote = _search(RemoteLineage, cached, on_step=kill_once)
    remote.run()
    assert killed
    assert all(isinstance(lin, RemoteLineage) for lin in remote.lineages)

    def history(search):
        return {
            lin.lineage_id: [(m.candidate_id, m.parent_ids, m.generation) for m in lin.members]
            for lin in search.lineages
        }

    assert history(remote) == history(local)
    assert set(remote.forked) == set(local.forked)
    # the restarted actor got its lineage back: it proposes what the driver's lineage would
    lin = next(x for x in remote.lineages if x.lineage_id == killed[0])
    assert ray.get(lin.actor.size.remote()) == len(lin.members)
    for x in remote.lineages:
        x.close()
