"""Timing methods behind one signature: `(fn, clocks, warmup, runs, between) -> Timed`.

Runs inside the evaluator's child process. On CUDA: CUDA events around each run, an L2
flush before each run, a device-wide synchronize, and the host time of each run beside it
(work hidden from the events shows up as a gap). On CPU: perf_counter with warm-ups.
`between(r)` runs outside the timed region before run r (fresh inputs); `after(r)` after it.
The clocks are captured before the candidate is imported, so rebinding them has no effect.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kforge_search.evaluator.result import TimingStats

Hook = Callable[[int], None]


@dataclass(frozen=True)
class Clocks:
    perf_counter: Callable[[], float]
    synchronize: Callable[[], None]
    event: Any  # torch.cuda.Event, or None on CPU
    device: str


def capture_clocks(device: str) -> Clocks:
    if device.startswith("cuda"):
        import torch

        return Clocks(time.perf_counter, torch.cuda.synchronize, torch.cuda.Event, device)
    return Clocks(time.perf_counter, lambda: None, None, device)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks; `sorted_values` must be sorted."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def stats(method: str, times_ms: list[float], host_ms: list[float] | None = None) -> TimingStats:
    ordered = sorted(times_ms)
    return TimingStats(
        method=method,
        runs=len(ordered),
        p20_ms=percentile(ordered, 0.2),
        p50_ms=percentile(ordered, 0.5),
        p80_ms=percentile(ordered, 0.8),
        host_p50_ms=percentile(sorted(host_ms), 0.5) if host_ms else 0.0,
    )


def _nothing(run: int) -> None:
    return None


def time_cuda_events(
    fn: Callable[[], object],
    clocks: Clocks,
    warmup: int,
    runs: int,
    between: Hook = _nothing,
    after: Hook = _nothing,
) -> TimingStats:
    import torch

    props = torch.cuda.get_device_properties(clocks.device)
    l2_bytes = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    flush = torch.empty(max(2 * l2_bytes, 64 * 2**20) // 4, dtype=torch.float32, device="cuda")
    for _ in range(warmup):
        fn()
    clocks.synchronize()
    times, host = [], []
    for run in range(runs):
        between(run)
        flush.zero_()  # evict the previous run's data from L2
        clocks.synchronize()
        start = clocks.event(enable_timing=True)
        end = clocks.event(enable_timing=True)
        t0 = clocks.perf_counter()
        start.record()
        fn()
        end.record()
        clocks.synchronize()  # device-wide: work on any stream is waited for
        host.append((clocks.perf_counter() - t0) * 1e3)
        times.append(start.elapsed_time(end))
        after(run)
    return stats("cuda_events", times, host)


def time_perf_counter(
    fn: Callable[[], object],
    clocks: Clocks,
    warmup: int,
    runs: int,
    between: Hook = _nothing,
    after: Hook = _nothing,
) -> TimingStats:
    for _ in range(warmup):
        fn()
    times = []
    for run in range(runs):
        between(run)
        start = clocks.perf_counter()
        fn()
        times.append((clocks.perf_counter() - start) * 1e3)
        after(run)
    return stats("perf_counter", times)


METHODS: dict[str, Callable[..., TimingStats]] = {
    "cuda_events": time_cuda_events,
    "perf_counter": time_perf_counter,
}
