"""The profile stage: what a verified candidate's forward spends its time on.

Runs in the candidate's child process after timing, on the same guarded model. On CUDA,
torch.profiler (CUPTI) gives each device kernel's time; on every platform the launch
counter's wrappers give each launch's host time (a C++ extension call on CPU is its kernel).
On CPU, OS counters (perf events where the kernel offers them, else rusage) over the
profiled calls. ncu runs apart (evaluator/ncu.py) and is merged in by the parent.

The profile is advice for the agents, never part of the reward: nothing here changes a
status or a time.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PROFILED_CALLS = 5  # forward calls recorded
TIMELINE_SPANS = 400  # at most, of the last call


@dataclass(frozen=True)
class KernelStat:
    """One kernel (or extension function) over the profiled calls."""

    name: str
    calls: int  # launches over all profiled forward calls
    total_us: float
    where: str = "device"  # "device": CUPTI kernel time; "host": the launch call's wall time


@dataclass(frozen=True)
class Span:
    """One launch in the timeline of the last profiled call (microseconds from its start)."""

    name: str
    start_us: float
    dur_us: float
    lane: str  # "device" or "host"


@dataclass(frozen=True)
class NcuKernel:
    """Nsight Compute's metrics of one kernel launch (name -> value, units in the name)."""

    name: str
    metrics: tuple[tuple[str, float], ...]

    def get(self, metric: str) -> float | None:
        return next((v for k, v in self.metrics if k == metric), None)


@dataclass(frozen=True)
class Profile:
    tool: str  # "torch.profiler" (CUDA) or "launch-timer" (host timing of launches)
    device: str  # "cuda" or "cpu"
    calls: int  # forward calls profiled
    wall_us_per_call: float  # host wall clock of one call, synchronized
    launches_per_call: float
    kernels: tuple[KernelStat, ...] = ()  # slowest first
    timeline: tuple[Span, ...] = ()
    counters: tuple[tuple[str, float], ...] = ()  # CPU: per call
    ncu: tuple[NcuKernel, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be measured, and why

    @property
    def kernel_us_per_call(self) -> float:
        """Summed kernel time of one call (device kernels on CUDA, launch calls on CPU)."""
        where = "device" if any(k.where == "device" for k in self.kernels) else "host"
        return sum(k.total_us for k in self.kernels if k.where == where) / max(self.calls, 1)

    def counter(self, name: str) -> float | None:
        return next((v for k, v in self.counters if k == name), None)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        return cls(
            tool=data["tool"],
            device=data["device"],
            calls=int(data["calls"]),
            wall_us_per_call=float(data["wall_us_per_call"]),
            launches_per_call=float(data["launches_per_call"]),
            kernels=tuple(KernelStat(**k) for k in data.get("kernels", ())),
            timeline=tuple(Span(**s) for s in data.get("timeline", ())),
            counters=tuple((str(k), float(v)) for k, v in data.get("counters", ())),
            ncu=tuple(
                NcuKernel(n["name"], tuple((str(k), float(v)) for k, v in n["metrics"]))
                for n in data.get("ncu", ())
            ),
            notes=tuple(data.get("notes", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> Profile:
        return cls.from_dict(json.loads(text))


@dataclass
class LaunchTrace:
    """Filled by the launch counter's wrappers while `on`: (name, start, end) per launch."""

    on: bool = False
    launches: list[tuple[str, float, float]] = field(default_factory=list)


def _host_kernels(launches: list[tuple[str, float, float]]) -> list[KernelStat]:
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for name, start, end in launches:
        total[name] += (end - start) * 1e6
        count[name] += 1
    return [KernelStat(n, count[n], total[n], "host") for n in total]


MARK = "kforge.call"  # a host range around each profiled call, in CUPTI's clock


def _device_kernels(prof: Any) -> tuple[list[KernelStat], list[tuple[str, float, float]], float]:
    """CUPTI kernel events: per-name totals, (name, start_us, end_us) of each, and the start
    of the last call's host range (same clock)."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    spans = []
    last_mark = 0.0
    for event in prof.events():
        if event.name == MARK:
            last_mark = max(last_mark, float(event.time_range.start))
            continue
        if "CUDA" not in str(getattr(event, "device_type", "")):
            continue
        dur = float(getattr(event, "device_time_total", 0.0) or 0.0)
        if dur <= 0 or event.name.startswith(("Memcpy", "Memset")):
            continue
        total[event.name] += dur
        count[event.name] += 1
        start = float(event.time_range.start)
        spans.append((event.name, start, start + dur))
    return [KernelStat(n, count[n], total[n], "device") for n in total], spans, last_mark


def _timeline(
    host: list[tuple[str, float, float]],
    host_origin_s: float,
    device: list[tuple[str, float, float]],
    device_origin_us: float,
) -> tuple[Span, ...]:
    """The last call: host launches (perf_counter) and device kernels (CUPTI), both from
    the call's start."""
    spans = [Span(n, (s - host_origin_s) * 1e6, (e - s) * 1e6, "host") for n, s, e in host]
    spans += [
        Span(n, s - device_origin_us, e - s, "device")
        for n, s, e in device
        if s >= device_origin_us
    ]
    spans.sort(key=lambda s: s.start_us)
    return tuple(spans[:TIMELINE_SPANS])


def collect(
    call: Callable[[], object],
    device: str,
    trace: LaunchTrace,
    synchronize: Callable[[], None],
    calls: int = PROFILED_CALLS,
) -> Profile:
    """Profile `calls` forward calls (warm: the model was just timed)."""
    notes: list[str] = []
    counters = CpuCounters() if device == "cpu" else None
    prof = _start_torch_profiler() if device.startswith("cuda") else None
    if device.startswith("cuda") and prof is None:
        notes.append("torch.profiler could not start: no device kernel times")
    trace.launches.clear()
    walls: list[float] = []
    origin, first = 0.0, 0
    if counters is not None:
        counters.start()
    trace.on = True
    try:
        for _ in range(calls):
            synchronize()
            first, origin = len(trace.launches), time.perf_counter()
            with _mark(prof):
                call()
                synchronize()
            walls.append(time.perf_counter() - origin)
    finally:
        trace.on = False
        if prof is not None:
            prof.__exit__(None, None, None)
    counted: tuple[tuple[str, float], ...] = ()
    if counters is not None:
        counted, note = counters.stop(calls)
        notes += [note] if note else []
    launches = list(trace.launches)
    kernels = _host_kernels(launches)
    device_spans: list[tuple[str, float, float]] = []
    device_origin = 0.0
    if prof is not None:
        device_kernels, device_spans, device_origin = _device_kernels(prof)
        kernels += device_kernels
        if not device_kernels:
            notes.append("torch.profiler recorded no device kernels (CUPTI unavailable?)")
    kernels.sort(key=lambda k: (k.where != "device", -k.total_us))
    walls.sort()
    return Profile(
        tool="torch.profiler" if prof is not None else "launch-timer",
        device="cuda" if device.startswith("cuda") else "cpu",
        calls=calls,
        wall_us_per_call=walls[len(walls) // 2] * 1e6,
        launches_per_call=len(launches) / calls,
        kernels=tuple(kernels),
        timeline=_timeline(launches[first:], origin, device_spans, device_origin),
        counters=counted,
        notes=tuple(notes),
    )


def _mark(prof: Any) -> Any:
    import contextlib

    if prof is None:
        return contextlib.nullcontext()
    from torch.profiler import record_function

    return record_function(MARK)


def _start_torch_profiler() -> Any:
    try:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.__enter__()
        return prof
    except Exception:
        return None


# -- CPU counters ---------------------------------------------------------------------------

_PERF_EVENT_OPEN = 298  # x86_64 syscall number
_HW, _SW = 0, 1
PERF_EVENTS = (  # (name, type, config)
    ("cycles", _HW, 0),
    ("instructions", _HW, 1),
    ("cache_references", _HW, 2),
    ("cache_misses", _HW, 3),
    ("branch_misses", _HW, 5),
    ("task_clock_ms", _SW, 1),
    ("context_switches", _SW, 3),
    ("cpu_migrations", _SW, 4),
    ("page_faults", _SW, 2),
)


class CpuCounters:
    """perf events of every thread of this process (user space only), opened through the
    perf_event_open system call; whatever the kernel refuses is left out and named. Plus
    rusage: CPU seconds over wall seconds is the average number of busy threads."""

    def __init__(self) -> None:
        self._fds: dict[str, list[int]] = {}
        self._refused: list[str] = []
        self._usage: Any = None
        self._wall = 0.0

    def start(self) -> None:
        import os
        import platform
        import resource

        if platform.machine() == "x86_64":
            tids = [int(t) for t in os.listdir("/proc/self/task")]
            for name, kind, config in PERF_EVENTS:
                fds = [fd for tid in tids if (fd := _open_event(kind, config, tid)) >= 0]
                if fds:
                    self._fds[name] = fds
                else:
                    self._refused.append(name)
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._wall = time.perf_counter()
        for fds in self._fds.values():
            for fd in fds:
                _ioctl(fd, 0x2400)  # PERF_EVENT_IOC_ENABLE

    def stop(self, calls: int) -> tuple[tuple[tuple[str, float], ...], str]:
        import os
        import resource

        wall = time.perf_counter() - self._wall
        usage = resource.getrusage(resource.RUSAGE_SELF)
        values: list[tuple[str, float]] = []
        for name, fds in self._fds.items():
            total = 0
            for fd in fds:
                _ioctl(fd, 0x2401)  # PERF_EVENT_IOC_DISABLE
                total += int.from_bytes(os.read(fd, 8), "little")
                os.close(fd)
            value = total / 1e6 if name == "task_clock_ms" else float(total)
            values.append((name, value / calls))
        cpu_s = (usage.ru_utime - self._usage.ru_utime) + (usage.ru_stime - self._usage.ru_stime)
        values += [
            ("cpu_ms", cpu_s * 1e3 / calls),
            ("busy_threads", cpu_s / wall if wall > 0 else 0.0),
            ("voluntary_switches", (usage.ru_nvcsw - self._usage.ru_nvcsw) / calls),
            ("involuntary_switches", (usage.ru_nivcsw - self._usage.ru_nivcsw) / calls),
            ("minor_faults", (usage.ru_minflt - self._usage.ru_minflt) / calls),
        ]
        note = ""
        if self._refused:
            note = f"perf events not available here: {', '.join(self._refused)}"
        return tuple(values), note


@functools.cache
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _open_event(kind: int, config: int, tid: int) -> int:
    import ctypes
    import struct

    attr = bytearray(128)
    # type, size, config, sample_period, sample_type, read_format, flags:
    # disabled (bit 0), exclude_kernel (bit 5), exclude_hv (bit 6)
    struct.pack_into("IIQQQQQ", attr, 0, kind, 128, config, 0, 0, 0, (1 << 0) | (1 << 5) | (1 << 6))
    buf = ctypes.create_string_buffer(bytes(attr), 128)
    try:
        return int(_libc().syscall(_PERF_EVENT_OPEN, buf, tid, -1, -1, 0))
    except OSError:
        return -1


def _ioctl(fd: int, request: int) -> None:
    _libc().ioctl(fd, request, 0)
