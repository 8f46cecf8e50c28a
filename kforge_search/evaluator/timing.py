"""Timing methods behind one signature: `(fn, clocks, warmup, runs, between) -> Timed`.

Runs inside the evaluator's child process. On CUDA: an L2 flush before each run, then a
short device-side wait (a spin kernel) and CUDA events around the run, then a device-wide
synchronize. The wait lets the host enqueue the run while the device is still busy, as in a
model where the host runs ahead: the events time the device's work, not the host's launch
latency, which after the harness's pauses between runs (fresh inputs) measured 0.07-0.3 ms
per call on an H100 and would otherwise be counted as kernel time. Beside it, the host time
of each run: wall clock from enqueueing to the device-wide synchronize, less the wait (work
hidden from the events, on other streams, shows up as a gap). On CPU: perf_counter.
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
TIMING_VERSION = 2  # part of the baseline cache key: bump when the method's figures change


@dataclass(frozen=True)
class Clocks:
    perf_counter: Callable[[], float]
    synchronize: Callable[[], None]
    event: Any  # torch.cuda.Event, or None on CPU
    device: str
    spin: Callable[[int], None] | None = None  # torch.cuda._sleep (cycles), where torch has it


def capture_clocks(device: str) -> Clocks:
    if device.startswith("cuda"):
        import torch

        spin = getattr(torch.cuda, "_sleep", None)
        return Clocks(time.perf_counter, torch.cuda.synchronize, torch.cuda.Event, device, spin)
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
    enqueue_ms = 0.0
    for _ in range(warmup):
        t0 = clocks.perf_counter()
        fn()
        enqueue_ms = max(enqueue_ms, (clocks.perf_counter() - t0) * 1e3)
    clocks.synchronize()
    spin = _spin(clocks, min(20.0, 0.2 + 3 * enqueue_ms))
    times, host = [], []
    for run in range(runs):
        between(run)
        flush.zero_()  # evict the previous run's data from L2
        clocks.synchronize()
        waited = clocks.event(enable_timing=True)
        start = clocks.event(enable_timing=True)
        end = clocks.event(enable_timing=True)
        t0 = clocks.perf_counter()
        waited.record()
        spin()
        start.record()
        fn()
        end.record()
        clocks.synchronize()  # device-wide: work on any stream is waited for
        wall = (clocks.perf_counter() - t0) * 1e3
        host.append(max(0.0, wall - waited.elapsed_time(start)))
        times.append(start.elapsed_time(end))
        after(run)
    return stats("cuda_events", times, host)


def _spin(clocks: Clocks, ms: float) -> Callable[[], None]:
    """A device-side wait of about `ms` (calibrated once); nothing where torch has no spin
    kernel, which leaves the host's launch latency in the timed region (slower, not faster)."""
    sleep = clocks.spin  # captured before the candidate was imported
    if sleep is None:
        return lambda: None
    cycles = 1_000_000
    begin, finish = clocks.event(enable_timing=True), clocks.event(enable_timing=True)
    begin.record()
    sleep(cycles)
    finish.record()
    clocks.synchronize()
    per_ms = cycles / max(begin.elapsed_time(finish), 1e-3)
    count = int(per_ms * ms)
    return lambda: sleep(count)


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
