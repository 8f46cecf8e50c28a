"""What evaluator and writer actors ask Ray for (pure functions, no cluster)."""

from __future__ import annotations

import dataclasses

import pytest

from kforge_search.actors.resources import (
    ResourceError,
    device_resource,
    evaluator_options,
    host_sharers,
    plan_pools,
    writer_options,
)
from kforge_search.platforms import get_platform

CUDA = get_platform("cuda-triton")
CUDA_CPP = get_platform("cuda-cpp")
CPU = get_platform("cpu-cpp")


def test_gpu_actors_ask_a_gpu_and_the_device_resource_where_declared():
    cluster = {"CPU": 400.0, "GPU": 16.0, "kforge_gpu": 16.0}
    options = evaluator_options(CUDA, 8, cluster, cluster)
    assert options == {"num_gpus": 1.0, "num_cpus": 0, "resources": {"kforge_gpu": 1.0}}
    laptop = {"CPU": 8.0, "GPU": 1.0}  # a plain ray.init(): no custom resources
    assert evaluator_options(CUDA, 1, laptop, laptop)["resources"] == {}


def test_gpu_actors_that_could_never_start_are_refused():
    with pytest.raises(ResourceError, match="needs 2 GPU"):
        evaluator_options(CUDA, 2, {"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0})
    with pytest.raises(ResourceError, match="has 0"):
        evaluator_options(CUDA, 1, {"CPU": 8.0}, {"CPU": 8.0})
    # an autoscaling cluster starts GPU nodes on demand: ask, do not refuse
    options = evaluator_options(CUDA, 4, {"CPU": 8.0}, {"CPU": 8.0}, autoscaling=True)
    assert options["resources"] == {"kforge_gpu": 1.0}


def test_cpu_actors_are_sized_from_the_free_cpus():
    assert evaluator_options(CPU, 1, {"CPU": 2.0}, {"CPU": 2.0})["num_cpus"] == 1.0
    assert evaluator_options(CPU, 4, {"CPU": 2.0}, {"CPU": 2.0})["num_cpus"] == 0.5
    assert evaluator_options(CPU, 3, {"CPU": 2.0}, {"CPU": 1.0})["num_cpus"] == 0.3333
    assert evaluator_options(CPU, 1, {"CPU": 2.0}, {"CPU": 2.0})["num_gpus"] == 0
    with pytest.raises(ResourceError, match="none is free"):
        evaluator_options(CPU, 1, {"CPU": 2.0}, {"CPU": 0.0})
    with pytest.raises(ValueError, match="size=0"):
        evaluator_options(CPU, 0, {"CPU": 2.0}, {"CPU": 2.0})


def test_other_declared_resources_must_exist():
    odd = dataclasses.replace(CPU, ray_resources=(("CPU", 1.0), ("avx512", 1.0)))
    with pytest.raises(ResourceError, match="avx512"):
        evaluator_options(odd, 2, {"CPU": 8.0, "avx512": 1.0}, {"CPU": 8.0})
    assert evaluator_options(odd, 1, {"CPU": 8.0, "avx512": 1.0}, {"CPU": 8.0})["resources"] == {
        "avx512": 1.0
    }


def test_device_resources_and_the_writer_slot():
    assert device_resource(CUDA) == "kforge_gpu"
    assert device_resource(CPU) == ""
    assert writer_options({"CPU": 2.0}) == {"resources": {}}
    assert writer_options({"kforge_writer": 1.0}) == {"resources": {"kforge_writer": 1.0}}


def test_gpu_actors_can_share_a_gpu():
    laptop = {"CPU": 8.0, "GPU": 1.0}
    assert evaluator_options(CUDA, 2, laptop, laptop, per_gpu=2)["num_gpus"] == 0.5
    assert evaluator_options(CUDA, 3, laptop, laptop, per_gpu=3)["num_gpus"] == 0.3333
    with pytest.raises(ResourceError, match=r"needs 1\.5 GPU"):
        evaluator_options(CUDA, 3, laptop, laptop, per_gpu=2)
    with pytest.raises(ValueError, match="per_gpu=0"):
        evaluator_options(CUDA, 1, laptop, laptop, per_gpu=0)


def _node(cpus: float, gpus: float = 0.0, declared: bool = True) -> dict[str, float]:
    node = {"CPU": cpus, "GPU": gpus} if gpus else {"CPU": cpus}
    return {**node, "kforge_gpu": gpus} if gpus and declared else node


def _plans(nodes, workers=None, per_gpu=None, platforms=(CUDA,)):
    plans = plan_pools(list(platforms), nodes, workers, per_gpu)
    return {name: (p.actors, p.per_gpu) for name, p in plans.items()}


def test_pools_keep_the_cores_of_each_gpu_busy_unless_told():
    h100 = [_node(16.0, 1.0, declared=False)]  # the H100 machine: 8 actors share its GPU
    assert _plans(h100) == {"cuda-triton": (8, 8)}
    assert _plans([_node(4.0, 2.0)]) == {"cuda-triton": (2, 1)}  # few cores
    assert _plans([_node(400.0, 4.0)]) == {"cuda-triton": (32, 8)}  # at most 8
    assert _plans(h100, per_gpu=2) == {"cuda-triton": (2, 2)}
    assert _plans([_node(2.0)], platforms=(CPU,)) == {"cpu-cpp": (1, 1)}  # CPU: one actor
    assert _plans([_node(2.0)], workers=2, platforms=(CPU,)) == {"cpu-cpp": (2, 1)}


def test_every_gpu_of_a_node_is_a_lane_of_its_own():
    """N GPUs on a node: per_gpu actors on each, from the node's cores per GPU."""
    two = [_node(32.0, 2.0)]  # 16 cores per GPU: 8 actors on each
    assert _plans(two) == {"cuda-triton": (16, 8)}
    assert _plans([_node(16.0, 2.0)]) == {"cuda-triton": (8, 4)}
    eight = [_node(64.0, 8.0)]  # 8 cores per GPU: 4 actors on each, 32 in all
    assert _plans(eight) == {"cuda-triton": (32, 4)}
    assert _plans(eight, per_gpu=2) == {"cuda-triton": (16, 2)}
    # options that fill every GPU: 1/4 of a GPU each, and 32 quarters are 8 GPUs
    total = {"CPU": 64.0, "GPU": 8.0, "kforge_gpu": 8.0}
    options = evaluator_options(CUDA, 32, total, total, per_gpu=4)
    assert options["num_gpus"] == 0.25 and options["resources"] == {"kforge_gpu": 0.25}


def test_gpu_nodes_of_a_cluster_and_cpu_nodes_beside_them():
    """cluster.yaml's kinds: a head without CPUs for evaluators, two 8-GPU nodes, CPU nodes.
    The CPU nodes' cores build nothing for the GPUs: the GPU nodes' own cores size the
    sharing, and the node with the fewest cores per GPU decides."""
    head = {"CPU": 0.0, "kforge_writer": 1.0}
    cluster = [head, _node(192.0, 8.0), _node(192.0, 8.0), _node(32.0), _node(32.0)]
    assert _plans(cluster) == {"cuda-triton": (128, 8)}
    small = [head, _node(192.0, 8.0), _node(48.0, 8.0), *[_node(32.0)] * 6]
    assert _plans(small) == {"cuda-triton": (48, 3)}  # 6 cores per GPU on the small one
    assert _plans([head, *[_node(32.0)] * 6]) == {"cuda-triton": (1, 1)}  # no GPU: refused
    with pytest.raises(ResourceError, match="has 0"):  # ... when the pool asks
        evaluator_options(CUDA, 1, {"CPU": 192.0}, {"CPU": 192.0})


def test_two_gpu_platforms_share_every_gpu():
    """cuda-triton and cuda-cpp in one search: each GPU's slots split between them, so the
    second pool is not left waiting for GPUs the first one took."""
    both = (CUDA, CUDA_CPP)
    assert _plans([_node(16.0, 1.0)], platforms=both) == {
        "cuda-triton": (4, 8),
        "cuda-cpp": (4, 8),
    }
    assert _plans([_node(64.0, 8.0)], platforms=both) == {
        "cuda-triton": (16, 4),
        "cuda-cpp": (16, 4),
    }
    assert _plans([_node(4.0, 2.0)], platforms=both) == {
        "cuda-triton": (2, 2),
        "cuda-cpp": (2, 2),
    }
    with pytest.raises(ResourceError, match="--per-gpu 1 with 2 GPU platforms"):
        _plans([_node(16.0, 1.0)], per_gpu=1, platforms=both)
    mixed = _plans([_node(16.0, 2.0)], platforms=(CUDA, CPU, CUDA_CPP))
    assert mixed == {"cuda-triton": (4, 4), "cpu-cpp": (1, 1), "cuda-cpp": (4, 4)}


def test_named_workers_are_spread_over_every_gpu():
    """--workers W: each actor asks 1/ceil(W / GPUs) of a GPU, so Ray puts them on every
    GPU (one of 1/8 each would pack all of them onto GPU 0); a count that cannot be spread
    over every GPU is refused with the numbers."""
    two = [_node(32.0, 2.0)]
    assert _plans(two, workers=2) == {"cuda-triton": (2, 1)}  # a GPU each
    assert _plans(two, workers=4) == {"cuda-triton": (4, 2)}
    assert _plans(two, workers=3) == {"cuda-triton": (3, 2)}  # 2 on one GPU, 1 on the other
    assert _plans([_node(16.0, 1.0)], workers=3) == {"cuda-triton": (3, 3)}
    eight = [_node(64.0, 8.0)]
    assert _plans(eight, workers=5) == {"cuda-triton": (5, 1)}  # 5 GPUs, one actor each
    assert _plans(eight, workers=24) == {"cuda-triton": (24, 3)}
    assert _plans(eight, workers=15) == {"cuda-triton": (15, 2)}  # 2 on 7 GPUs, 1 on one
    with pytest.raises(ResourceError, match="9 evaluator actors on 8 GPUs, 2 to a GPU, would"):
        _plans(eight, workers=9)  # 2 on 4 GPUs, 1 on one, 3 idle
    with pytest.raises(ResourceError, match="--per-gpu 2 allows fewer"):
        _plans(eight, workers=24, per_gpu=2)
    assert _plans(eight, workers=8, per_gpu=8) == {"cuda-triton": (8, 1)}  # spread, not packed
    both = (CUDA, CUDA_CPP)
    assert _plans(two, workers=1, platforms=both) == {"cuda-triton": (1, 1), "cuda-cpp": (1, 1)}
    assert _plans(two, workers=3, platforms=both) == {"cuda-triton": (3, 3), "cuda-cpp": (3, 3)}
    with pytest.raises(ResourceError, match="10 evaluator actors on 8 GPUs"):  # 3 idle
        _plans(eight, workers=5, platforms=both)


def test_the_evaluators_of_one_node_split_its_memory_for_references():
    from kforge_search.evaluator.config import CACHED_SHARE, EvalConfig, cached_share

    h100 = [{"CPU": 16.0, "GPU": 1.0, "memory": 128e9}]
    eight = [{"CPU": 128.0, "GPU": 8.0}, {"CPU": 8.0}]  # an 8-GPU node beside a CPU node
    one = plan_pools([CUDA], h100, None, None)
    assert host_sharers([CUDA], one, h100) == 8  # 8 actors sharing the one GPU
    big = plan_pools([CUDA, CPU], eight, None, None)
    assert host_sharers([CUDA, CPU], big, eight) == big[CUDA.name].per_gpu * 8 + 1
    assert host_sharers([CPU], plan_pools([CPU], h100, 2, None), h100) == 2
    # up to 8 sharers each keeps its 5%; 64 keep 40% of the node between them, not 320%
    assert cached_share(1) == cached_share(8) == CACHED_SHARE
    assert cached_share(64) * 64 == pytest.approx(0.4)
    with pytest.raises(ValueError, match="host_sharers"):
        EvalConfig(host_sharers=0)


def test_an_evaluator_that_shares_its_node_streams_a_reference_sooner():
    from kforge_search.evaluator import footprint
    from kforge_search.evaluator.config import EvalConfig, cached_share
    from kforge_search.evaluator.pipeline import Evaluator

    alone = Evaluator(EvalConfig(reference_keep_mb=10**6))
    shared = Evaluator(EvalConfig(reference_keep_mb=10**6, host_sharers=64))
    machine = footprint.machine_bytes()
    assert alone._keep_bytes() == 10**6 * 2**20  # alone on the machine: as configured
    assert shared._keep_bytes() == int(cached_share(64) * machine) < alone._keep_bytes()
    default = Evaluator(EvalConfig(host_sharers=64))
    assert default._keep_bytes() == int(cached_share(64) * machine)
    small = Evaluator(EvalConfig(reference_keep_mb=1, host_sharers=64))
    assert small._keep_bytes() == 2**20  # the configured size where it is smaller
