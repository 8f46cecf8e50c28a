"""The baseline child's torch.compile off the device lock (baseline_child.compiled)."""

from __future__ import annotations

import torch

from kforge_search.evaluator.baseline_child import compiled


class _Channel:
    """What the child tells its parent, recorded (a safe point returns at once: "go")."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def send(self, event_type: str, /, **fields: object) -> None:
        self.events.append(event_type)

    def safe_point(self, **fields: object) -> None:
        self.events.append(f"pause:{fields.get('back')}")


class _Square(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(x, x)  # an extern kernel: Inductor builds no C++ for it


def test_the_compile_is_announced_and_the_hold_asked_back_before_the_graph_runs():
    channel = _Channel()
    fn = compiled(_Square(), channel, "cpu", aside=True)  # as on an accelerator
    assert channel.events == []  # torch.compile is lazy: nothing compiled yet
    x = torch.randn(8, 8)
    torch.testing.assert_close(fn(x), x @ x)
    assert channel.events == ["aside", "pause:compiled"]
    fn(x)  # compiled once: no second round
    assert channel.events == ["aside", "pause:compiled"]


def test_on_the_cpu_a_compile_stays_under_the_hold():
    channel = _Channel()
    fn = compiled(_Square(), channel, "cpu")
    x = torch.randn(8, 8)
    torch.testing.assert_close(fn(x), x @ x)
    assert channel.events == []
