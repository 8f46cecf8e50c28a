"""cluster.yaml passes Ray's own cluster-launcher validation and offers what actors ask."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ray._private.label_utils import validate_node_label_syntax
from ray.autoscaler._private.util import prepare_config, validate_config

from kforge_search.actors.resources import (
    DEVICE_LABEL,
    WRITER_RESOURCE,
    device_resource,
    evaluator_options,
    writer_options,
)
from kforge_search.platforms import PLATFORMS

CLUSTER = Path(__file__).resolve().parents[2] / "cluster.yaml"


def _load() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER.read_text())


def _validate(config: dict[str, Any]) -> dict[str, Any]:
    """What `ray up` does before it talks to the cloud: fill defaults, then validate."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_is_valid_for_ray():
    prepared = _validate(_load())
    assert prepared["provider"]["type"] == "aws"
    for kind in prepared["available_node_types"].values():
        validate_node_label_syntax(kind.get("labels", {}))


def _set(path: str, value: Any) -> Any:
    """A breakage: set one nested key ("a.b.c") of the config."""

    def apply(config: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            config = config[key]
        config[last] = value

    return apply


def _drop_cpu_resources(config: dict[str, Any]) -> None:
    del config["available_node_types"]["cpu"]["resources"]


BROKEN = {
    "string count": (_set("available_node_types.gpu-h100.resources.GPU", "8"), "not of type"),
    "head type": (_set("head_node_type", "missing"), "must be one of"),
    "unknown key": (_set("available_node_types.cpu.gpus", 8), "gpus' was unexpected"),
    "no resources": (_drop_cpu_resources, "'resources' is a required property"),
    "min workers": (_set("available_node_types.cpu.min_workers", 20), "max_workers"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_copy_is_rejected(name):
    breakage, message = BROKEN[name]
    config = _load()
    breakage(config)
    with pytest.raises((jsonschema.ValidationError, ValueError), match=message):
        _validate(config)


def _node_types() -> dict[str, dict[str, Any]]:
    return _load()["available_node_types"]


def test_the_head_hosts_the_writer_and_no_evaluators():
    config = _load()
    head = config["available_node_types"][config["head_node_type"]]
    assert head["resources"][WRITER_RESOURCE] == 1
    assert head["resources"]["CPU"] == 0
    assert writer_options(head["resources"])["resources"] == {WRITER_RESOURCE: 1.0}
    others = [k for n, k in _node_types().items() if n != config["head_node_type"]]
    assert all(WRITER_RESOURCE not in k["resources"] for k in others)  # one writer slot


@pytest.mark.parametrize("name", [n for n, p in PLATFORMS.items() if p.runnable])
def test_every_runnable_platform_has_a_worker_kind(name):
    platform = PLATFORMS[name]
    hosts = []
    for kind_name, kind in _node_types().items():
        resources = {k: float(v) for k, v in kind["resources"].items()}
        try:
            options = evaluator_options(platform, 1, resources, resources)
        except Exception:
            continue
        if options["num_gpus"] == 0 and resources.get("CPU", 0) == 0:
            continue
        hosts.append(kind_name)
        if platform.node_label:  # a device kind: the nodes say so in their label too
            assert kind["labels"][DEVICE_LABEL] == platform.node_label
            assert options["resources"] == {device_resource(platform): 1.0}
    expected = {"gpu": {"gpu-h100", "gpu-h200"}, "": {"gpu-h100", "gpu-h200", "cpu"}}
    assert set(hosts) == expected[platform.node_label]
