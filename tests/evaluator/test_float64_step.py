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

    def __init__(self, full: int, raised: type[Exception] = torch.OutOfMemoryError, said: str = ""):
        super().__init__()
        self.full, self.calls = full, 0
        self.raised, self.said = raised, said or "CUDA out of memory. Tried to allocate 12.00 GiB"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= self.full:
            raise self.raised(self.said)
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


def test_the_allocators_nvml_assert_in_place_of_out_of_memory_runs_the_trial_on_the_host():
    """Where NVML does not initialize, the allocator's assert stands for the out-of-memory
    (out_of_memory.device_oom); any other error of the model is still its own."""
    from tests.evaluator.test_out_of_memory import NVML_ASSERT

    x = torch.randn(8, 5)
    model = _FullDevice(full=1, raised=RuntimeError, said=NVML_ASSERT)
    outs, why = exact.float64_step(model, [x], "cuda:0")
    assert why == "" and model.calls == 2 and torch.equal(outs[0], torch.relu(x.double()))
    outs, why = exact.float64_step(_FullDevice(1, RuntimeError, "bad shape"), [x], "cuda:0")
    assert outs == [] and "bad shape" in why
