"""A kind that raised in the baseline child (baseline_child.failed): said busy where it ran
out of device memory that other processes held, the allocator's cache freed after it."""

from __future__ import annotations

import torch

from kforge_search.evaluator import baseline_child
from kforge_search.evaluator.result import DEVICE_BUSY_REASON


class _Channel:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def send(self, event_type: str, /, **fields: object) -> None:
        self.events.append({"type": event_type, **fields})


def _raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as caught:
        return caught


def _failed(exc: Exception, crowded: bool, monkeypatch) -> tuple[dict, list[str]]:
    freed: list[str] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: freed.append("freed"))
    reasons = [DEVICE_BUSY_REASON] if crowded else []  # the device's state (out_of_memory.py)
    monkeypatch.setattr(baseline_child.out_of_memory, "busy_reasons", lambda e: reasons)
    channel = _Channel()
    baseline_child.failed(channel, "compile", _raised(exc))
    (event,) = channel.events
    return event, freed


def test_an_out_of_memory_beside_others_is_said_busy_and_frees_the_cache(monkeypatch):
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    event, freed = _failed(oom, True, monkeypatch)
    assert event == {
        "type": "baseline", "kind": "compile", "ok": False, "busy": True,
        "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB",
    }  # fmt: skip
    assert freed == ["freed"]
    event, freed = _failed(oom, False, monkeypatch)  # its own: the device was not crowded
    assert not event["busy"] and freed == ["freed"]


def test_another_failure_is_not_busy_and_leaves_the_cache(monkeypatch):
    event, freed = _failed(RuntimeError("shapes differ"), False, monkeypatch)
    assert event["error"] == "RuntimeError: shapes differ" and event["busy"] is False
    assert freed == []
