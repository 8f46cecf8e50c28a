"""A streamed reference's float64 run, one trial at a time (exact.float64_step): where the
accelerator runs out of memory for it (other processes hold it), the trial runs on the host
and a model with weights stays there for the trials after (not shown on this machine:
its weights are on the host from the start); a run that fails there too has no float64
reference and says why. (On this CPU machine the device's out-of-memory is raised by hand.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kforge_search.evaluator import exact


class _FullDevice(nn.Module):
    """Raises the accelerator's out-of-memory while `full` says so (each call counted)."""

    def __init__(self, full: int):
        super().__init__()
        self.full, self.calls = full, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= self.full:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")
        return torch.relu(x)


@pytest.fixture(autouse=True)
def _host_rng(monkeypatch):  # no CUDA generator on this machine: the host's alone
    monkeypatch.setattr(exact, "_rng_states", lambda device: [torch.get_rng_state()])


def test_out_of_device_memory_runs_the_trial_on_the_host():
    x = torch.randn(8, 5)
    model = _FullDevice(full=1)
    outs, why = exact.float64_step(model, [x], "cuda:0")
    assert why == "" and model.calls == 2
    assert outs[0].dtype == torch.float64 and torch.equal(outs[0], torch.relu(x.double()))


def test_out_of_memory_on_the_host_too_has_no_float64_reference():
    outs, why = exact.float64_step(_FullDevice(full=9), [torch.randn(4)], "cuda:0")
    assert outs == [] and why == "numerics: no float64 reference: the float64 run ran out of memory"
    outs, why = exact.float64_step(_FullDevice(full=9), [torch.randn(4)], "cpu")
    assert outs == [] and "ran out of memory" in why
