"""N GPUs on a node, and nodes of a cluster: the evaluator pools `kforge search` starts put
their actors on every GPU, each pinned by Ray to one GPU whose device lock is its timing
lane. Real Ray, with GPUs it is told the machine has (tests/search/fake_gpus.py, in a process
of its own: the test session's cluster has no GPUs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kforge_search.cli.app import app
from tests.conftest import ROOT


def _lanes(mode: str) -> dict[str, dict[str, int]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.search.fake_gpus", mode],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_pools_of_a_two_gpu_node_time_on_both_gpus():
    lanes = _lanes("node")
    # --workers 2: one actor on each GPU, each GPU's lock its own
    assert lanes["workers"] == {"n0/cuda-0": 1, "n0/cuda-1": 1}
    # each actor's node says the GPUs are not there for torch: a search stops with the reason
    assert len(lanes["unavailable"]) == 2 and all(lanes["unavailable"]), lanes["unavailable"]
    # cuda-triton and cuda-cpp, --per-gpu 2: both pools start, two actors on every GPU
    assert lanes["platforms"] == {"n0/cuda-0": 2, "n0/cuda-1": 2}
    # why the plan sizes shares so: Ray fills one GPU before the next, so two actors asking
    # 1/4 of a GPU each (a share sized from the cores alone) both time on one GPU
    assert list(lanes["packed"].values()) == [2]


@pytest.mark.slow  # four Ray nodes on one machine start in about 20 s
def test_the_pools_of_a_cluster_time_on_every_gpu_of_its_gpu_nodes():
    """Two 2-GPU nodes beside a head without CPUs for evaluators and a CPU-only node, as
    cluster.yaml's kinds: GPU actors go to the GPU nodes (kforge_gpu), one per GPU."""
    lanes = _lanes("cluster")
    every = {"n0/cuda-0": 1, "n0/cuda-1": 1, "n1/cuda-0": 1, "n1/cuda-1": 1}
    assert lanes["default"] == every  # --per-gpu 1: one actor on each of the 4 GPUs
    assert lanes["platforms"] == every  # cuda-triton and cuda-cpp, --workers 2: 4 GPUs


@pytest.mark.usefixtures("ray_cluster")
def test_a_search_that_joins_a_cluster_asks_its_nodes_not_the_driver(tmp_path):
    """On cluster.yaml's layout the driver runs on the head, which has no GPU: a GPU
    platform is not refused there but by the cluster (the session's has no GPU either)."""
    args = ["search", "level1/10_elementwise_chain", "--platform", "cuda-triton"]
    args += ["--sizes", "ci", "--address", "auto", "--db", str(tmp_path / "k.duckdb")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "cannot run on this machine" not in result.output
    assert "needs 1 GPU(s) for 1 actor(s) but the Ray cluster has 0" in result.output
