"""The evaluator's cheaper paths (issue 23) give the same answers as the plain ones:
comparisons on the accelerator (verify.placed), inputs and models drawn on the device with
a CPU fallback (inputs.drawn), the process-tree walk (procs.tree), one atol scale pass per
reference."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import torch

from kforge_search.evaluator import inputs, verify
from kforge_search.evaluator.policy import get_policy
from kforge_search.procs import tree


def test_placed_leaves_values_on_the_cpu_without_a_device() -> None:
    values = ([torch.ones(3)], {"b": torch.zeros(2)})
    assert verify.placed(values, None) is values


def test_placed_leaves_values_too_large_for_the_device(monkeypatch) -> None:
    monkeypatch.setattr(verify, "DEVICE_COMPARE_BYTES", 8)
    values = [torch.ones(3)]  # 12 bytes
    assert verify.placed(values, "meta") is values
    monkeypatch.setattr(verify, "DEVICE_COMPARE_BYTES", 1 << 20)
    moved = verify.placed((values, {"x": torch.ones(2)}, 3), "meta")
    assert moved[0][0].device.type == "meta" and moved[1]["x"].device.type == "meta"
    assert moved[2] == 3


def test_drawn_falls_back_to_the_cpu_with_the_same_values() -> None:
    def make() -> torch.Tensor:
        x = torch.randn(4, 5)
        return torch.from_numpy(x.numpy() * 2)  # .numpy(): cannot run on the device

    got = inputs.drawn(make, "meta", 7)  # meta: the device context, where .numpy() raises
    torch.manual_seed(7)
    want = torch.randn(4, 5) * 2
    assert torch.equal(got, want)


def test_drawn_uses_the_device_context() -> None:
    got = inputs.drawn(lambda: torch.empty(2, 3), "meta", 1)
    assert got.device.type == "meta"
    assert inputs.drawn(lambda: torch.empty(2), "cpu", 1).device.type == "cpu"


def test_descendants_walk_finds_what_a_full_scan_finds() -> None:
    # Rooted at the child, not at pytest: the session's Ray cluster and other
    # tests' leftovers are pytest's descendants too and come and go meanwhile.
    proc = subprocess.Popen(["bash", "-c", "sleep 5 & sleep 5 & wait"])
    try:
        deadline = time.monotonic() + 5
        while len(tree.descendants(proc.pid, tree.processes())) < 2:
            assert time.monotonic() < deadline, "the children did not start"
            time.sleep(0.05)
        scanned = sorted(tree.descendants(proc.pid, tree.processes()))
        assert sorted(tree.descendants(proc.pid)) == scanned
        assert len(scanned) == 2 and proc.pid not in scanned
        assert proc.pid in tree.descendants(os.getpid())
    finally:
        proc.kill()
        proc.wait()


def _outputs(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(300, 70, generator=g), torch.rand(5, generator=g)]


@pytest.mark.gpu
def test_comparison_on_the_gpu_gives_the_cpu_verdict() -> None:
    policy = get_policy("strict")
    expected = [_outputs(0)]
    close = [[t + 1e-6 for t in expected[0]]]
    off = [[expected[0][0].clone(), expected[0][1] + 1e-2]]
    exact = [[t.double() for t in expected[0]]]
    for actual in (close, off):
        on_cpu = verify.compare_outputs(expected, actual, policy, exact=exact)
        moved = verify.placed((expected, actual, exact), "cuda")
        assert moved[0][0][0].is_cuda
        on_gpu = verify.compare_outputs(moved[0], moved[1], policy, exact=moved[2])
        assert on_gpu.ok == on_cpu.ok
        assert on_gpu.correctness.trials_passed == on_cpu.correctness.trials_passed
        assert on_gpu.correctness.max_abs_err == pytest.approx(on_cpu.correctness.max_abs_err)
        if on_cpu.mismatch is not None:
            assert on_gpu.mismatch is not None
            assert on_gpu.mismatch.n_mismatched == on_cpu.mismatch.n_mismatched
            assert on_gpu.mismatch.indices == on_cpu.mismatch.indices


def test_drawn_does_not_fall_back_when_the_device_is_full() -> None:
    """Out of memory is the device's state at that moment: falling back to the CPU there would
    give this process other values than a process whose draw fit."""

    def full() -> torch.Tensor:
        if torch.empty(1).device.type == "meta":
            raise torch.OutOfMemoryError("CUDA out of memory")
        return torch.ones(1)

    with pytest.raises(torch.OutOfMemoryError):
        inputs.drawn(full, "meta", 3)
