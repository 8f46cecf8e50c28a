"""What an actor asks Ray for, from a platform and the cluster's resources (no Ray import).

Names shared with `cluster.yaml`: GPU nodes carry the custom resource `kforge_<node_label>`
(one unit per GPU, e.g. `kforge_gpu: 8`) and the label `kforge.io/device: <node_label>`;
the head carries `kforge_writer: 1`, the one slot of the database writer. A resource the
cluster does not declare is not asked for (a laptop's `ray.init()` has none of them), and a
demand the cluster can never meet is an error here rather than an actor that waits forever.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PoolPlan:
    """One platform's evaluator pool: `actors` actors; on GPUs each asks 1/`per_gpu` of one
    GPU, `per_gpu` being how many actors, of every GPU platform of the search, share a GPU
    (its timing lane)."""

    actors: int
    per_gpu: int


def _gpu_nodes(nodes: Sequence[Mapping[str, float]], resource: str) -> tuple[int, float]:
    """(GPUs of the device kind in the cluster, CPU cores per GPU on the GPU node that has
    the fewest); a node's GPUs are its `resource` where the cluster declares it, else GPU."""
    declared = any(resource in node for node in nodes)
    counts = [(int(n.get(resource if declared else "GPU", 0.0)), n.get("CPU", 0.0)) for n in nodes]
    counts = [(gpus, cpus) for gpus, cpus in counts if gpus > 0]
    if not counts:
        return 0, 0.0
    return sum(g for g, _ in counts), min(cpus / gpus for gpus, cpus in counts)


def _share(group: Sequence[Platform], gpus: int, cores: float, workers: int | None,
           per_gpu: int | None) -> PoolPlan:  # fmt: skip
    """The plan of each of `group`'s platforms (those timing on one kind of GPU)."""
    k = len(group)
    if workers is None:  # per_gpu actors of every platform together on each GPU
        slots = per_gpu or max(1, min(MOST_PER_GPU, int(cores // CPUS_PER_ACTOR)))
        each = max(1, slots // k)
        if per_gpu is not None and k * each > per_gpu:
            raise ResourceError(
                f"--per-gpu {per_gpu} with {k} GPU platforms: each GPU needs an actor of every "
                f"platform; give --per-gpu {k} or more"
            )
        return PoolPlan(max(1, gpus) * each, k * each)
    total = k * workers
    share = max(1, -(-total // gpus)) if gpus else per_gpu or 1
    used = min(gpus, -(-total // share))  # Ray fills a GPU's share before the next GPU
    if total > gpus and used < gpus:  # 9 actors of 1/2 GPU on 8 GPUs: 5 time, 3 stay idle
        raise ResourceError(
            f"{k} GPU platform(s) x --workers {workers} = {total} evaluator actors on {gpus} "
            f"GPUs, {share} to a GPU, would leave {gpus - used} GPU(s) idle: give --workers "
            f"so that {k} x it is at most {gpus} or fills every GPU, or leave it out (every "
            "GPU x --per-gpu)"
        )
    if per_gpu is not None and share > per_gpu:
        raise ResourceError(
            f"{total} GPU evaluator actors on {gpus} GPUs put {share} on each GPU; "
            f"--per-gpu {per_gpu} allows fewer: give fewer --workers or more --per-gpu"
        )
    return PoolPlan(workers, share)


def plan_pools(
    platforms: Sequence[Platform],
    nodes: Sequence[Mapping[str, float]],
    workers: int | None,
    per_gpu: int | None,
) -> dict[str, PoolPlan]:
    """Each platform's evaluator pool, by name, from the resources of the cluster's alive
    nodes (`ray.nodes()`' "Resources"); `workers` (actors per platform) and `per_gpu`
    (actors sharing a GPU) as the user gave them, or None.

    GPU platforms: one timing lane per GPU of the cluster, each shared by the actors of
    every GPU platform that time on it; where the user named neither, as many as the cores
    of the GPU's node keep busy building and verifying (CPUS_PER_ACTOR each, at most
    MOST_PER_GPU: the H100 machine's 16 cores, 8; the node with the fewest cores per GPU
    decides), split among the GPU platforms. Ray places each actor on one GPU and fills a
    GPU's share before it starts the next: the actors of all GPU pools together fill every
    GPU, and a count that would leave GPUs idle while others are shared is refused.
    CPU platforms: `workers` actors, else one (its timed runs take the machine's cores:
    they run alone)."""
    plans: dict[str, PoolPlan] = {}
    groups: dict[str, list[Platform]] = {}
    for platform in platforms:
        if dict(platform.ray_resources).get("GPU"):
            groups.setdefault(device_resource(platform) or "GPU", []).append(platform)
        else:
            plans[platform.name] = PoolPlan(workers or 1, 1)
    for resource, group in groups.items():
        gpus, cores = _gpu_nodes(nodes, resource)
        plan = _share(group, gpus, cores, workers, per_gpu)
        plans.update({platform.name: plan for platform in group})
    return {platform.name: plans[platform.name] for platform in platforms}


def writer_options(total: Mapping[str, float]) -> dict[str, Any]:
    """The writer actor runs where the cluster put `kforge_writer` (the head, next to the
    database file), or anywhere on a cluster without it (a local `ray.init()`)."""
    resources = {WRITER_RESOURCE: 1.0} if total.get(WRITER_RESOURCE, 0.0) >= 1 else {}
    return {"resources": resources}


def host_sharers(
    platforms: Sequence[Platform],
    plans: Mapping[str, PoolPlan],
    nodes: Sequence[Mapping[str, float]],
) -> int:
    """At most how many of these pools' evaluator actors share one machine's memory: the
    GPU pools' actors sharing each GPU times the most GPUs of one node, and every CPU pool's
    actors (they may all land on one node). Each keeps its share of the references
    (evaluator/config.cached_share)."""
    most_gpus = max((int(n.get("GPU", 0.0)) for n in nodes), default=0)
    gpu = [plans[p.name].per_gpu for p in platforms if dict(p.ray_resources).get("GPU")]
    cpu = sum(plans[p.name].actors for p in platforms if not dict(p.ray_resources).get("GPU"))
    return max(1, max(gpu, default=0) * most_gpus + cpu)
