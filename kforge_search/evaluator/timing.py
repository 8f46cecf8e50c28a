"""Timing methods behind one signature: `(fn, device, warmup, runs) -> TimingStats`.

Runs inside the evaluator's child process. On CUDA: CUDA events around each run, an L2
flush before each run, a device-wide synchronize. On CPU: perf_counter with warm-ups.
"""

from __future__ import annotations

from collections.abc import Callable

from kforge_search.evaluator.result import TimingStats


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks; `sorted_values` must be sorted."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def stats(method: str, times_ms: list[float], meaningful: bool = True) -> TimingStats:
    ordered = sorted(times_ms)
    return TimingStats(
        method=method,
        runs=len(ordered),
        p20_ms=percentile(ordered, 0.2),
        p50_ms=percentile(ordered, 0.5),
        p80_ms=percentile(ordered, 0.8),
        meaningful=meaningful,
    )


def time_cuda_events(fn: Callable[[], object], device: str, warmup: int, runs: int) -> TimingStats:
    import torch

    props = torch.cuda.get_device_properties(device)
    l2_bytes = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    flush = torch.empty(max(2 * l2_bytes, 64 * 2**20) // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        flush.zero_()  # evict the previous run's data from L2
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()  # device-wide: work on any stream is waited for
        times.append(start.elapsed_time(end))
    return stats("cuda_events", times)


def time_perf_counter(fn: Callable[[], object], device: str, warmup: int, runs: int) -> TimingStats:
    import time

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return stats("perf_counter", times)


METHODS: dict[str, Callable[[Callable[[], object], str, int, int], TimingStats]] = {
    "cuda_events": time_cuda_events,
    "perf_counter": time_perf_counter,
}
