"""Evaluator pools on a Ray cluster of fake GPUs, for tests/search/test_gpu_pools.py:

    python -m tests.search.fake_gpus node|cluster

Its own Ray cluster (the test session's has no GPUs, and one driver joins one cluster):
`node`, one node with 2 GPUs; `cluster`, two such nodes beside a head without GPUs and a
CPU-only node, as cluster.yaml's kinds (ray.cluster_utils). Ray hands out GPUs a machine
does not have as it hands out real ones: each actor that asks a share of one is given one
GPU's id in CUDA_VISIBLE_DEVICES. Prints, as one JSON object, each scenario's lanes: how
many actors time in each lane (actors.pool.EvaluatorPool.lanes), by "<node>/<lock key>",
and why torch cannot use these GPUs, as each actor's node says.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import ray

from kforge_search.actors.pool import EvaluatorPool
from kforge_search.actors.resources import plan_pools
from kforge_search.platforms import get_platform

TRITON, CPP = get_platform("cuda-triton"), get_platform("cuda-cpp")
GPU_NODE: dict[str, Any] = {"num_cpus": 16, "num_gpus": 2, "resources": {"kforge_gpu": 2}}


def _lanes(pools: list[EvaluatorPool]) -> dict[str, int]:
    """Every pool's actors by lane, the node named by its order of appearance (n0, n1)."""
    nodes: dict[str, str] = {}
    found: Counter[str] = Counter()
    for pool in pools:
        pool.wait_ready(60.0)
        for lane, count in pool.lanes().items():
            _, node, key = lane.split("/")
            found[f"{nodes.setdefault(node, f'n{len(nodes)}')}/{key}"] += count
    return dict(sorted(found.items()))


def _measured(pools: list[EvaluatorPool], checked: list[str] | None = None) -> dict[str, int]:
    """The pools' lanes (then the pools end); `checked` gets why each actor's node cannot
    run the platform (EvaluatorPool.unavailable: these GPUs are not there for torch)."""
    try:
        lanes = _lanes(pools)
        for pool in pools if checked is not None else ():
            checked.extend(pool.unavailable().values())
        return lanes
    finally:
        for pool in pools:
            pool.shutdown()


def _planned(
    platforms: list, workers: int | None, per_gpu: int | None, checked: list[str] | None = None
) -> dict[str, int]:
    """The lanes of the pools `kforge search` starts for `platforms` (cli/execute.py)."""
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    plans = plan_pools(platforms, nodes, workers, per_gpu)
    return _measured([EvaluatorPool(p, plans[p.name].actors, per_gpu=plans[p.name].per_gpu)
                      for p in platforms], checked)  # fmt: skip


@contextlib.contextmanager
def _ray(mode: str) -> Iterator[None]:
    if mode == "node":
        ray.init(address="local", include_dashboard=False, log_to_driver=False, **GPU_NODE)
        try:
            yield
        finally:
            ray.shutdown()
        return
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 0, "resources": {"kforge_writer": 1}, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(2):
            cluster.add_node(**GPU_NODE, labels={"kforge.io/device": "gpu"})
        cluster.add_node(num_cpus=4, labels={"kforge.io/device": "cpu"})
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()


def main(mode: str) -> dict[str, Any]:
    with _ray(mode):
        if mode == "node":
            checked: list[str] = []
            return {
                "workers": _planned([TRITON], 2, None, checked),  # --workers 2
                "unavailable": checked,
                "platforms": _planned([TRITON, CPP], None, 2),  # two GPU platforms, --per-gpu 2
                # a share sized from the node's cores alone, as before: 1/4 of a GPU each
                "packed": _measured([EvaluatorPool(TRITON, 2, per_gpu=4)]),
            }
        return {
            "default": _planned([TRITON], None, 1),  # --per-gpu 1
            "platforms": _planned([TRITON, CPP], 2, None),  # two GPU platforms, --workers 2
        }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
