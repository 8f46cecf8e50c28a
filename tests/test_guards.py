"""Unit tests of the in-process guards (the end-to-end ones are in tests/adversarial)."""

from __future__ import annotations

import os
import time

import pytest
import torch

from kforge_search.evaluator import guards, timing


def test_recorder_allows_allocation_views_and_copies_only():
    x = torch.randn(4, 6)
    with guards.OpRecorder() as honest:
        out = torch.empty_like(x)
        out.copy_(x.t().contiguous().t())
        out.view(-1)[:3]
    assert honest.forbidden == {}
    with guards.OpRecorder() as cheat:
        torch.relu(x @ x.T)
    assert set(cheat.forbidden) == {"relu", "mm"}


def test_world_guard_refuses_writes_outside_and_records_them(tmp_path):
    world = guards.WorldGuard([tmp_path])
    world.hook("open", (str(tmp_path / "ok.txt"), "w", os.O_WRONLY))
    world.hook("open", ("/etc/passwd", "r", os.O_RDONLY))
    world.hook("subprocess.Popen", ("ninja", ["ninja"], None, None))
    assert world.violations == []
    with pytest.raises(PermissionError):
        world.hook("open", ("/tmp/../etc/evil", "w", os.O_WRONLY))
    with pytest.raises(PermissionError):
        world.hook("open", (str(tmp_path / ".." / "escape"), "a", os.O_WRONLY))
    with pytest.raises(PermissionError):
        world.hook("socket.__new__", (None, 2, 1, 0))
    with pytest.raises(PermissionError):
        world.hook("subprocess.Popen", ("/bin/sh", ["sh"], None, None))
    reasons = [reason for reason, _ in world.violations]
    assert reasons == [
        "sandbox:write-outside",
        "sandbox:write-outside",
        "sandbox:socket",
        "sandbox:subprocess",
    ]


def test_integrity_finds_a_rebound_clock(monkeypatch):
    integrity = guards.Integrity(guards.harness_targets())
    assert integrity.changed() == []
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(timing, "stats", lambda *a, **k: None)
    assert {"time.perf_counter", "kforge_search.evaluator.timing.stats"} <= set(integrity.changed())


def test_integrity_finds_rebound_input_drawing(monkeypatch):
    """A candidate that draws the verification inputs itself could cache their outputs."""
    from kforge_search.evaluator import inputs

    integrity = guards.Integrity(guards.harness_targets())
    monkeypatch.setattr(inputs, "make_inputs", lambda *a: [])
    monkeypatch.setattr(inputs, "timing_inputs", lambda *a: [])
    assert {
        "kforge_search.evaluator.inputs.make_inputs",
        "kforge_search.evaluator.inputs.timing_inputs",
    } <= set(integrity.changed())


def test_launch_counter_counts_extension_calls():
    class Ext:
        def kernel(self, x):
            return x

    counter = guards.LaunchCounter()
    ext = counter.wrap_extension(Ext(), ["kernel"])
    ext.kernel(1)
    ext.kernel(2)
    assert counter.count == 2


def test_percentiles_and_timing_hooks_run_outside_the_timed_region():
    calls = []
    clocks = timing.capture_clocks("cpu")
    stats = timing.time_perf_counter(
        lambda: calls.append("run"),
        clocks,
        2,
        5,
        lambda r: calls.append(f"in{r}"),
        lambda r: calls.append(f"out{r}"),
    )
    assert stats.runs == 5 and stats.p20_ms <= stats.p50_ms <= stats.p80_ms
    assert calls[:4] == ["run", "run", "in0", "run"] and calls[-1] == "out4"
    assert timing.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
