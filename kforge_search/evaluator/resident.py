"""A held reference's trials kept on the accelerator between candidates (parent side).

The parent compares each verification trial on the device (verify.placed). It copied the
reference's outputs for that trial, and its float64 copies, from the host for every trial of
every candidate: on an H200 at level 2's published sizes (a 32 MiB output) that was 0.024 s
a trial and 0.34 s for a first trial (its float64 row too; 4.2 s at most beside 8 busy
evaluators), all of it under the device's shared hold that timings wait for. Here they are
copied once per reference and evaluator and kept while the evaluator works on it: the
newest two at most (a problem's and its unseen sizes'), together no larger than `budget`
(1 GiB, at most 1/64 of the device's memory: 8 evaluators on a GPU keep 8 GiB at most).
The comparisons only read them (verify.py changes its own temporaries in place, never its
inputs).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kforge_search.evaluator.verify import moved_to

KEEP = 2  # references kept at once: a problem's and its unseen sizes'
MOST_BYTES = 1 << 30  # the kept references' trials at most (and 1/64 of the device's memory)


def device_budget(device: str) -> int:
    """What one evaluator keeps of held references' trials on `device`, at most: MOST_BYTES,
    at most 1/64 of its memory (here, or in its oracles: oracle_held.py)."""
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    return min(MOST_BYTES, total // 64)


@dataclass(frozen=True)
class Trials:
    """A reference's trials as the comparisons take them: outputs, float64 rows (or None)
    and changed buffers, per trial."""

    outputs: Sequence[Sequence[Any]]
    exact: Sequence[Sequence[Any]] | None
    buffers: Sequence[dict[str, Any]]


class Resident:
    """The trials of the newest KEEP references, on `device`. Thread-safe: an evaluator's
    lent work runs on threads of its own."""

    def __init__(self, device: str, budget: int | None = None):
        self.device = device
        self._budget = budget
        self._kept: OrderedDict[int, tuple[weakref.ref[Any], Trials, int]] = OrderedDict()
        self._mutex = threading.Lock()

    def budget(self) -> int:
        """The kept references' bytes at most (device_budget)."""
        if self._budget is None:
            self._budget = device_budget(self.device)
        return self._budget

    def trials(self, reference: Any, held: Trials, size: int) -> Trials:
        """`held` (the trials of `reference`, `size` bytes in all) on the device, copied the
        first time it is asked for; `held` itself where it is too large or the device has
        no room for it."""
        if size > self.budget():
            return held
        with self._mutex:
            key = id(reference)
            if (entry := self._kept.get(key)) is not None and entry[0]() is reference:
                self._kept.move_to_end(key)
                return entry[1]
            self._kept.pop(key, None)  # a dead reference's, at the same address
            while self._kept and (
                len(self._kept) >= KEEP
                or sum(e[2] for e in self._kept.values()) + size > self.budget()
            ):
                self._kept.popitem(last=False)  # its device copies go with it
            try:
                placed = Trials(
                    [moved_to(trial, self.device) for trial in held.outputs],
                    [moved_to(row, self.device) for row in held.exact]
                    if held.exact is not None
                    else None,
                    [moved_to(b, self.device) for b in held.buffers],
                )
            except RuntimeError:  # out of the device's memory: compared from the host
                return held
            self._kept[key] = (weakref.ref(reference), placed, size)
            return placed

    def clear(self) -> None:
        with self._mutex:
            self._kept.clear()
