"""N GPUs on a node: one timing lane per GPU, shared by every process that times on it.

Real processes take the device lock as evaluators do (tests/evaluator/lane_holder.py), each
seeing the node's GPUs through its own CUDA_VISIBLE_DEVICES, as Ray's actors do; no GPU is
needed (the lock names the GPU, it does not open it). The references and baselines of a node
are shared across its GPUs; the timing lanes are not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator
from kforge_search.evaluator.devicelock import JOURNAL_ENV, LOCK_DIR_ENV, device_key
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import ROOT, own_cache


def _visible(value: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return env if value is None else {**env, "CUDA_VISIBLE_DEVICES": value}


def _hold_at_once(
    tmp_path: Path, holders: dict[str, tuple[str | None, str, float]], meet: int
) -> dict[str, list]:
    """Each holder (name: (CUDA_VISIBLE_DEVICES, device, wait_s)) in a process of its own,
    all taking their lanes exclusively at once and holding them until they have met `meet`
    others (or their `wait_s` passed): name -> the holders it met while it held."""
    journal = tmp_path / "journal"
    procs = {}
    for name, (visible, device, wait_s) in holders.items():
        args = [device, name, str(tmp_path), str(len(holders)), str(meet), str(wait_s)]
        env = {**_visible(visible), JOURNAL_ENV: str(journal)}
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.evaluator.lane_holder", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
    met = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, (name, out)
        met[name] = json.loads(out)
    holds = [line.split() for line in journal.read_text().splitlines()]
    assert len(holds) == len(holders) and {h[1] for h in holds} == {"exclusive"}
    return met


def test_one_gpu_is_one_lane_however_a_process_names_it(tmp_path):
    """GPU 1 of a node, seen by a Ray actor pinned to it (cuda:0 of CUDA_VISIBLE_DEVICES=1),
    by a process that sees every GPU (cuda:1) and by one that sees them in another order
    (cuda:0 of "1,0"): their timings wait for each other. GPU 0's goes on beside them."""
    met = _hold_at_once(
        tmp_path,
        {  # GPU 0's holder waits for GPU 1's first; each of GPU 1's, 1 s in vain for another
            "gpu0-actor": ("0", "cuda", 60.0),
            "gpu1-actor": ("1", "cuda", 1.0),
            "gpu1-all": (None, "cuda:1", 1.0),
            "gpu1-reordered": ("1,0", "cuda:0", 1.0),
        },
        meet=1,
    )
    gpu1 = {"gpu1-actor", "gpu1-all", "gpu1-reordered"}
    assert met["gpu0-actor"] and set(met["gpu0-actor"]) <= gpu1  # two GPUs: two lanes at once
    for name in gpu1:
        assert set(met[name]) <= {"gpu0-actor"}, met  # never another of GPU 1


def test_every_gpu_of_an_eight_gpu_node_times_at_once(tmp_path):
    """Eight actors, one per GPU (as Ray pins them): all eight time at one moment."""
    names = [f"gpu{i}" for i in range(8)]
    met = _hold_at_once(tmp_path, {n: (n[3:], "cuda", 60.0) for n in names}, meet=7)
    assert all(sorted(met[n]) == sorted(set(names) - {n}) for n in names), met


@pytest.mark.parametrize(
    ("visible", "device", "key"),
    [
        ("3", "cuda", "cuda-3"),
        (None, "cuda:3", "cuda-3"),
        ("5,3", "cuda:1", "cuda-3"),
        (" 2 , 6", "cuda:1", "cuda-6"),
        ("GPU-8f2e1c4a-77aa", "cuda", "cuda-GPU-8f2e1c4a-77aa"),
        ("MIG-GPU-8f2e/1/0", "cuda", "cuda-MIG-GPU-8f2e_1_0"),  # a file name, no folder
        ("0", "cuda:1", "cuda-unseen-1"),
        ("", "cuda", "cuda-unseen-0"),
        ("0", "cpu", "cpu"),
    ],
)
def test_the_lock_names_the_nodes_gpu(monkeypatch, visible, device, key):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert device_key(device) == key


def test_the_reference_is_the_nodes_the_lane_is_each_gpus(monkeypatch, tmp_path):
    """Evaluators pinned to GPU 0 and to GPU 1 of one node time in lanes of their own but
    share the node's stored reference: the second reads what the first computed (one
    reference child in all, one file). A CPU platform's reference: no GPU needed."""
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    config = EvalConfig(baselines=(), check_unseen=False, spare_child=False)
    lanes, outputs = [], []
    for gpu in ("0", "1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpu)
        evaluator = Evaluator(config)
        try:
            lanes.append(device_key("cuda"))
            outputs.append(evaluator.reference(problem, get_platform("cpu-triton"), oracle=False))
        finally:
            evaluator.close()
    assert lanes == ["cuda-0", "cuda-1"]
    assert len(list((tmp_path / "cache" / "references").glob("*.pt"))) == 1
    assert len(journal.read_text().splitlines()) == 1  # the first one's reference child only
    assert outputs[0].numerics.trial_ids == outputs[1].numerics.trial_ids
