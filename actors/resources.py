"""What an actor asks Ray for, from a platform and the cluster's resources (no Ray import).

Names shared with `cluster.yaml`: GPU nodes carry the custom resource `kforge_<node_label>`
(one unit per GPU, e.g. `kforge_gpu: 8`) and the label `kforge.io/device: <node_label>`;
the head carries `kforge_writer: 1`, the one slot of the database writer. A resource the
cluster does not declare is not asked for (a laptop's `ray.init()` has none of them), and a
demand the cluster can never meet is an error here rather than an actor that waits forever.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kforge_search.platforms import Platform

WRITER_RESOURCE = "kforge_writer"
DEVICE_LABEL = "kforge.io/device"


class ResourceError(RuntimeError):
    """The cluster cannot host the actors asked for; the message says what is missing."""


def device_resource(platform: Platform) -> str:
    """The custom resource of the platform's device kind ("" when any node will do)."""
    return f"kforge_{platform.node_label}" if platform.node_label else ""


def _floor(value: float) -> float:
    return math.floor(value * 1e4) / 1e4  # Ray keeps 4 decimals of fractional resources


def evaluator_options(
    platform: Platform,
    size: int,
    total: Mapping[str, float],
    available: Mapping[str, float],
    *,
    autoscaling: bool = False,
    per_gpu: int = 1,
) -> dict[str, Any]:
    """Ray options for each of `size` evaluator actors of `platform`.

    GPU platforms: one GPU per actor (1 / `per_gpu` of one: actors sharing a GPU build and
    verify side by side and time one at a time, evaluator/devicelock.py) plus the device
    kind's custom resource where the cluster declares it (or always, with `autoscaling`, so
    the autoscaler starts such a node); no CPU, so CPU pools never starve them.
    CPU platforms: min(1, free CPUs / size) CPUs each, sized from the CPUs free now, so all
    `size` actors start.
    `total` and `available` are `ray.cluster_resources()` and `ray.available_resources()`.
    """
    if size < 1 or per_gpu < 1:
        raise ValueError(f"size={size}, per_gpu={per_gpu}: an evaluator pool needs >= 1 of each")
    demands = dict(platform.ray_resources)
    gpus = demands.pop("GPU", 0.0)
    cpus = demands.pop("CPU", 0.0)
    for name, amount in demands.items():
        if not autoscaling and total.get(name, 0.0) < amount * size:
            raise ResourceError(
                f"{platform.name} actors ask for {name}={amount} each; the cluster has "
                f"{total.get(name, 0.0)} for {size} actors: add nodes that provide it"
            )
    if gpus:
        gpus = _floor(gpus / per_gpu)
        device = device_resource(platform)
        if device and (device in total or autoscaling):
            demands[device] = gpus
        have = total.get(device, 0.0) if device in total else total.get("GPU", 0.0)
        if not autoscaling and have < gpus * size - 1e-3:
            raise ResourceError(
                f"{platform.name} needs {gpus * size:g} GPU(s) for {size} actor(s) but the "
                f"Ray cluster has {have:g} ({device or 'GPU'}): use fewer actors, join a "
                "cluster with GPU nodes (see cluster.yaml), or a cpu-* platform"
            )
        return {"num_gpus": gpus, "num_cpus": 0, "resources": demands}
    free = available.get("CPU", 0.0)
    if free <= 0:
        raise ResourceError(
            f"{platform.name} actors need CPU but none is free in the Ray cluster "
            f"(total {total.get('CPU', 0.0):g}): stop other work or add CPU nodes"
        )
    per_actor = _floor(min(cpus or 1.0, free / size))
    if per_actor <= 0:
        raise ResourceError(f"{free:g} free CPUs cannot be shared by {size} actors")
    return {"num_cpus": per_actor, "num_gpus": 0, "resources": demands}


CPUS_PER_ACTOR = 2  # a sharing actor's parent (compares) and its candidate's child (builds)
MOST_PER_GPU = 8


def pool_size(
    platform: Platform, total: Mapping[str, float], workers: int | None, per_gpu: int | None
) -> tuple[int, int]:
    """(actors, actors per GPU) of a platform's evaluator pool where the user named neither:
    on GPUs, as many actors share each GPU as the node's cores keep busy building and
    verifying (CPUS_PER_ACTOR each, at most MOST_PER_GPU; the H100 machine's 16 cores: 8),
    one pool over every GPU of the cluster; on CPUs one actor (its timed runs take the
    machine's cores: they run alone)."""
    if not dict(platform.ray_resources).get("GPU"):
        return workers or 1, per_gpu or 1
    device = device_resource(platform)
    gpus = int(total.get(device, 0.0) if device in total else total.get("GPU", 0.0))
    if per_gpu is None:
        cpus = total.get("CPU", 1.0) / max(gpus, 1)
        per_gpu = max(1, min(MOST_PER_GPU, int(cpus // CPUS_PER_ACTOR)))
    return workers or max(1, gpus) * per_gpu, per_gpu


def writer_options(total: Mapping[str, float]) -> dict[str, Any]:
    """The writer actor runs where the cluster put `kforge_writer` (the head, next to the
    database file), or anywhere on a cluster without it (a local `ray.init()`)."""
    resources = {WRITER_RESOURCE: 1.0} if total.get(WRITER_RESOURCE, 0.0) >= 1 else {}
    return {"resources": resources}
