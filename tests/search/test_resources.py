"""What evaluator and writer actors ask Ray for (pure functions, no cluster)."""

from __future__ import annotations

import dataclasses

import pytest

from kforge_search.actors.resources import (
    ResourceError,
    device_resource,
    evaluator_options,
    writer_options,
)
from kforge_search.platforms import get_platform

CUDA = get_platform("cuda-triton")
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


def test_pool_size_keeps_the_cores_of_each_gpu_busy_unless_told():
    from kforge_search.actors.resources import pool_size

    h100 = {"CPU": 16.0, "GPU": 1.0}  # the H100 machine: 8 actors share its GPU
    assert pool_size(CUDA, h100, None, None) == (8, 8)
    two = {"CPU": 32.0, "GPU": 2.0, "kforge_gpu": 2.0}
    assert pool_size(CUDA, two, None, None) == (16, 8)
    assert pool_size(CUDA, {"CPU": 4.0, "GPU": 2.0}, None, None) == (2, 1)  # few cores
    assert pool_size(CUDA, {"CPU": 400.0, "GPU": 4.0}, None, None) == (32, 8)  # at most 8
    assert pool_size(CUDA, h100, 3, None) == (3, 8)  # what the user names stands
    assert pool_size(CUDA, h100, None, 2) == (2, 2)
    assert pool_size(CPU, {"CPU": 2.0}, None, None) == (1, 1)  # CPU platforms: one actor
    assert pool_size(CPU, {"CPU": 2.0}, 2, None) == (2, 1)
