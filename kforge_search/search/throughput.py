"""The figures of a throughput measurement (`kforge bench --throughput`): evaluations per
minute and per timing lane, the timing lane's busy fraction, CPU and GPU utilization and
seconds per evaluation by phase, over the whole run and over its steady state.

Pure functions over plain records: the evaluations a search stored, the holds of the device
lock's journal (evaluator/devicelock.py, $KFORGE_LOCK_JOURNAL) and the sampler's ticks.
search/throughput_run.py runs the search and reads them.

Steady state starts when every problem has had its first evaluation (the first one of a
problem pays for its reference and baselines) and ends with the last evaluation. A timing
lane is a device timed runs hold alone: one per GPU the evaluators were given, one for the
CPUs of a host.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Evaluation:
    """One stored evaluation, as the throughput reads it."""

    problem: str
    ended: float  # epoch seconds: when it was stored, just after it ended
    duration_s: float
    phases: tuple[tuple[str, float], ...] = ()  # seconds per phase (start, build, verify, ...)
    status: str = ""  # its verdict; INFRA_ERROR: the evaluator failed, the candidate was not
    # evaluated (not counted: a broken evaluator must not look fast)


@dataclass(frozen=True)
class Hold:
    """One hold of a device lock, a line of its journal: `holder mode start end [label]`."""

    holder: str
    mode: str  # "shared" (builds, verification) or "exclusive" (timed runs)
    start: float  # epoch seconds
    end: float
    label: str = ""  # what held it: "problem:mode" (devicelock.DeviceLock.label)
    asked: float | None = None  # when it was asked for (None: a journal from before)
    device: str = ""  # the lock's device key ("": a journal from before)

    @property
    def waited(self) -> float | None:
        return None if self.asked is None else max(0.0, self.start - self.asked)


@dataclass(frozen=True)
class Tick:
    """One sample of the machine: the CPUs' jiffies since boot (/proc/stat) and each GPU's
    utilization in percent (nvidia-smi; empty where there is none)."""

    at: float  # epoch seconds
    cpu_busy: int
    cpu_total: int
    gpus: tuple[float, ...] = ()
    parts: tuple[tuple[str, float], ...] = ()  # CPU seconds by part so far (procs/cpu_parts.py)
    hz: int = 100  # the jiffies' clock ticks per second


@dataclass(frozen=True)
class Window:
    """The figures over one stretch of wall clock [start, end]."""

    start: float
    end: float
    evaluations: int  # those that evaluated their candidate (not INFRA_ERROR)
    lanes: int
    lane_busy: float | None  # exclusive holds of the journal / (seconds x lanes); None: none
    lane_blocked: float | None  # a timing waited, none ran (lane_blocked); None: not known
    lane_waits: tuple[float, ...]  # each timing's wait for its lane, seconds, ascending
    timed_fraction: float  # the evaluations' "time*" phases / (seconds x lanes)
    cpu_utilization: float | None  # the host's, 0..1; None: no ticks
    gpu_utilization: tuple[float, ...]  # mean percent per GPU index
    mean_duration_s: float
    phases: tuple[tuple[str, float], ...]  # mean seconds per evaluation, largest first
    cpu_parts: tuple[tuple[str, float], ...] = ()  # CPU seconds per evaluation, largest first
    infra_errors: int = 0  # evaluations the evaluator failed (not in `evaluations`)
    # the timings' waits by what they waited for last (lane_waited_for), largest first
    lane_waited_for: tuple[tuple[str, float], ...] = ()

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def per_minute(self) -> float:
        return self.evaluations / (self.seconds / 60) if self.seconds > 0 else 0.0

    @property
    def per_lane_minute(self) -> float:
        return self.per_minute / self.lanes

    def lane_wait(self, q: float) -> float | None:
        """The q-percentile of the timings' waits for their lane (timing.percentile's, as a
        candidate's p50), None where none got it in the window."""
        from kforge_search.evaluator.timing import percentile

        return percentile(list(self.lane_waits), q) if self.lane_waits else None

    def as_dict(self, gpu: bool) -> dict[str, Any]:
        """JSON fields; `gpu`: the lanes are GPUs (a per-GPU-minute figure is given)."""
        return {
            "window_s": round(self.seconds, 1),
            "evaluations": self.evaluations,
            "infra_errors": self.infra_errors,
            "evaluations_per_minute": round(self.per_minute, 3),
            "evaluations_per_gpu_minute": round(self.per_lane_minute, 3) if gpu else None,
            "timing_lane_busy_fraction": _round(self.lane_busy, 3),
            "timing_lane_blocked_fraction": _round(self.lane_blocked, 3),
            "timing_lane_wait_s": {
                "p50": _round(self.lane_wait(0.5), 3),
                "p90": _round(self.lane_wait(0.9), 3),
            },
            "timing_lane_wait_s_by_last_holder": {k: round(v, 2) for k, v in self.lane_waited_for},
            "timed_phase_fraction": round(self.timed_fraction, 3),
            "cpu_utilization": _round(self.cpu_utilization, 3),
            "gpu_utilization_mean_pct": {
                str(i): round(u, 1) for i, u in enumerate(self.gpu_utilization)
            },
            "mean_duration_s": round(self.mean_duration_s, 2),
            "seconds_per_evaluation_by_phase": {k: round(v, 2) for k, v in self.phases},
            "cpu_seconds_per_evaluation_by_part": {k: round(v, 2) for k, v in self.cpu_parts},
        }


def parse_journal(text: str) -> tuple[Hold, ...]:
    """The holds of a lock journal; a line that is not `holder mode start end [label]
    [asked=T dev=KEY]` (one cut short by a kill) is skipped."""
    holds = []
    for line in text.splitlines():
        parts = line.split()
        keyed = dict(p.split("=", 1) for p in parts[4:] if p.startswith(("asked=", "dev=")))
        rest = [p for p in parts[4:] if not p.startswith(("asked=", "dev="))]
        if len(parts) < 4 or len(rest) > 1 or parts[1] not in ("shared", "exclusive"):
            continue
        try:
            asked = float(keyed["asked"]) if "asked" in keyed else None
            start, end = float(parts[2]), float(parts[3])
        except ValueError:
            continue
        holds.append(Hold(parts[0], parts[1], start, end, *rest, asked=asked,
                          device=keyed.get("dev", "")))  # fmt: skip
    return tuple(holds)


def steady_start(evaluations: Iterable[Evaluation]) -> float | None:
    """When the last problem's first evaluation ended (None: no evaluations)."""
    firsts: dict[str, float] = {}
    for e in evaluations:
        firsts[e.problem] = min(e.ended, firsts.get(e.problem, e.ended))
    return max(firsts.values(), default=None)


def phase_sums(evaluations: Iterable[Evaluation]) -> dict[str, float]:
    """Seconds per phase summed over the evaluations, the largest first."""
    sums: dict[str, float] = {}
    for e in evaluations:
        for name, seconds in e.phases:
            sums[name] = sums.get(name, 0.0) + seconds
    return dict(sorted(sums.items(), key=lambda kv: -kv[1]))


def _union(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _length(spans: Iterable[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def lane_busy(holds: Iterable[Hold], start: float, end: float, lanes: int) -> float | None:
    """The fraction of [start, end] x lanes that timed runs held a lane: the exclusive holds,
    cut to the window (those of one device never overlap). None: no holds at all (no
    journal) or an empty window."""
    holds = list(holds)
    if not holds or end <= start:
        return None
    held = _length(((h.start, h.end) for h in holds if h.mode == "exclusive"), start, end)
    return held / ((end - start) * lanes)


def lane_blocked(holds: Iterable[Hold], start: float, end: float, lanes: int) -> float | None:
    """The fraction of [start, end] x lanes in which a timing waited for its lane while no
    timing ran there: a candidate ready to be timed, kept off an idle lane by the shared
    holds (builds, verification, baselines) it queues behind. The rest of the idle lane had
    nothing to time: the candidates were not ready. None: no hold says when it was asked
    for (a journal from before), or an empty window."""
    holds = [h for h in holds if h.mode == "exclusive"]
    if not any(h.asked is not None for h in holds) or end <= start:
        return None
    blocked = 0.0
    for device in {h.device for h in holds}:
        mine = [h for h in holds if h.device == device]
        waiting = _union((h.asked, h.start) for h in mine if h.asked is not None)
        running = _union((h.start, h.end) for h in mine)
        blocked += _length(waiting, start, end) - _overlap(waiting, running, start, end)
    return blocked / ((end - start) * lanes)


def _overlap(
    one: list[tuple[float, float]], other: list[tuple[float, float]], start: float, end: float
) -> float:
    return sum(max(0.0, min(b, d, end) - max(a, c, start)) for a, b in one for c, d in other)


def lane_waits(holds: Iterable[Hold], start: float, end: float) -> tuple[float, ...]:
    """How long each timing that got its lane in [start, end] waited for it, in order."""
    return tuple(sorted(
        h.waited for h in holds
        if h.mode == "exclusive" and h.waited is not None and start <= h.start <= end
    ))  # fmt: skip


def cpu_utilization(ticks: Sequence[Tick], start: float, end: float) -> float | None:
    """The host's CPU utilization between the last tick at or before `start` (else the
    first) and the first at or after `end` (else the last); None: fewer than two ticks."""
    if len(ticks) < 2:
        return None
    first, last = _bounding(ticks, start, end)
    total = last.cpu_total - first.cpu_total
    return (last.cpu_busy - first.cpu_busy) / total if total > 0 else None


def _bounding(ticks: Sequence[Tick], start: float, end: float) -> tuple[Tick, Tick]:
    first = max((t for t in ticks if t.at <= start), key=lambda t: t.at, default=ticks[0])
    last = min((t for t in ticks if t.at >= end), key=lambda t: t.at, default=ticks[-1])
    return first, last


def cpu_parts(
    ticks: Sequence[Tick], start: float, end: float, evaluations: int
) -> dict[str, float]:
    """CPU seconds per evaluation by part between the ticks that bound [start, end] (as
    cpu_utilization), the largest first; "unseen": what the host's counter has beyond the
    parts (processes that lived between two ticks, the kernel's own). {}: no parts sampled."""
    if len(ticks) < 2 or not ticks[-1].parts or evaluations < 1:
        return {}
    first, last = _bounding(ticks, start, end)
    before = dict(first.parts)
    spent = {k: v - before.get(k, 0.0) for k, v in last.parts}
    spent = {k: v for k, v in spent.items() if v > 0}
    host = (last.cpu_busy - first.cpu_busy) / last.hz
    spent["unseen"] = max(0.0, host - sum(spent.values()))
    ranked = sorted(spent.items(), key=lambda kv: -kv[1])
    return {k: v / evaluations for k, v in ranked}


def gpu_utilization(ticks: Iterable[Tick], start: float, end: float) -> tuple[float, ...]:
    """Each GPU's mean utilization (percent) over the ticks in [start, end]."""
    inside = [t.gpus for t in ticks if start <= t.at <= end and t.gpus]
    count = min((len(g) for g in inside), default=0)
    return tuple(sum(g[i] for g in inside) / len(inside) for i in range(count))


def holder_kind(hold: Hold) -> str:
    """What a hold was. A shared one: its label's mode ("candidate", "baseline",
    "reference", ...: devicelock.DeviceLock.label), "spare" unlabelled (a spare's CUDA
    context: standby.warm_up). An exclusive one: "timing" (a candidate's, or unlabelled),
    else its mode's ("baseline timing")."""
    mode = hold.label.rpartition(":")[2]
    if hold.mode == "exclusive":
        return "timing" if mode in ("", "candidate") else f"{mode} timing"
    return mode or "spare"


def lane_waited_for(holds: Iterable[Hold], start: float, end: float) -> dict[str, float]:
    """Seconds the timings that got their lane in [start, end] waited, by what they waited
    for last: the kind (holder_kind) of the hold on the same device whose release let the
    timing in, the last to end in its wait (a shared one; or another timing it queued
    behind). Largest first. What the whole wait went to is not split: the last holder is
    the one a shorter hold would have had to be (H200, bench --throughput: 4.3 of 14.9 s
    behind spares' CUDA contexts, most of the rest behind candidates' steps)."""
    holds = list(holds)
    waited: dict[str, float] = {}
    for timing in holds:
        if timing.mode != "exclusive" or timing.asked is None or timing.waited is None:
            continue
        if not start <= timing.start <= end or timing.waited <= 0.0:
            continue
        released = [
            h for h in holds
            if h is not timing and h.device == timing.device
            and h.start < timing.start and timing.asked < h.end <= timing.start + 1e-3
        ]  # fmt: skip
        kind = holder_kind(max(released, key=lambda h: h.end)) if released else "unknown"
        waited[kind] = waited.get(kind, 0.0) + timing.waited
    return dict(sorted(waited.items(), key=lambda kv: -kv[1]))


def window(
    evaluations: Sequence[Evaluation],
    holds: Sequence[Hold],
    ticks: Sequence[Tick],
    start: float,
    end: float,
    lanes: int,
) -> Window:
    """The figures of the evaluations that ended in (start, end]; those the evaluator
    failed (INFRA_ERROR) are counted apart, in none of the other figures."""
    if lanes < 1:
        raise ValueError(f"lanes {lanes}: a window needs at least 1 timing lane")
    ended = [e for e in evaluations if start < e.ended <= end]
    inside = [e for e in ended if e.status != "INFRA_ERROR"]
    n = max(len(inside), 1)
    sums = phase_sums(inside)
    seconds = end - start
    timed = sum(v for k, v in sums.items() if k.startswith("time"))
    return Window(
        start=start,
        end=end,
        evaluations=len(inside),
        lanes=lanes,
        lane_busy=lane_busy(holds, start, end, lanes),
        lane_blocked=lane_blocked(holds, start, end, lanes),
        lane_waits=lane_waits(holds, start, end),
        lane_waited_for=tuple(lane_waited_for(holds, start, end).items()),
        timed_fraction=timed / (seconds * lanes) if seconds > 0 else 0.0,
        cpu_utilization=cpu_utilization(ticks, start, end),
        gpu_utilization=gpu_utilization(ticks, start, end),
        mean_duration_s=sum(e.duration_s for e in inside) / n,
        phases=tuple((k, v / n) for k, v in sums.items()),
        cpu_parts=tuple(cpu_parts(ticks, start, end, len(inside)).items()),
        infra_errors=len(ended) - len(inside),
    )


def steady_window(
    evaluations: Sequence[Evaluation], holds: Sequence[Hold], ticks: Sequence[Tick], lanes: int
) -> Window | None:
    """From the last problem's first evaluation to the last evaluation; None where no
    evaluation ended after it (too short a run for a steady state)."""
    start = steady_start(evaluations)
    if start is None:
        return None
    end = max(e.ended for e in evaluations)
    if end <= start:
        return None
    return window(evaluations, holds, ticks, start, end, lanes)


@dataclass(frozen=True)
class Best:
    """A problem's best verified evaluation: its speedup of record (over the fastest PyTorch
    setting that passes the policy, `peer`) and the fp32-only one."""

    problem: str
    speedup: float | None
    peer: str | None
    speedup_fp32: float | None


@dataclass(frozen=True)
class Throughput:
    """A throughput measurement: the search as run, its figures over the whole run and in
    steady state, and the best kernels it found."""

    platform: str
    gpu: bool  # the timing lanes are GPUs
    problems: tuple[str, ...]
    actors: int  # evaluator actors
    per_gpu: int  # actors sharing a GPU
    cpus: int
    command: str
    exit_code: int
    stopped: bool  # stopped at the duration (else the search ended by itself)
    evaluations: int
    verified: int
    busy_s: float  # the evaluations' summed durations
    whole: Window
    steady: Window | None
    best: tuple[Best, ...]
    runs: tuple[tuple[str, float | None], ...] = ()  # (kind, seconds) of the search's runs
    steps: int = 0  # lineage steps the search printed
    reused_steps: int = 0  # of them, steps whose results were all another lineage's (free)

    @property
    def wall_s(self) -> float:
        return self.whole.seconds

    def as_dict(self) -> dict[str, Any]:
        """throughput.json: the whole run's figures at the top level, `steady` beside them."""
        whole = self.whole.as_dict(self.gpu)
        return {
            "platform": self.platform,
            "problems": list(self.problems),
            "workers": self.actors,
            "per_gpu": self.per_gpu,
            "lanes": self.whole.lanes,
            "cpus": self.cpus,
            "wall_s": round(self.wall_s, 1),
            "stopped": self.stopped,
            "exit_code": self.exit_code,
            "command": self.command,
            "runs": [{"kind": k, "seconds": s} for k, s in self.runs],
            "evaluations": self.evaluations,
            "verified": self.verified,
            "lineage_steps": self.steps,
            "lineage_steps_reused": self.reused_steps,
            "evaluations_per_minute": whole["evaluations_per_minute"],
            "evaluations_per_gpu_minute": whole["evaluations_per_gpu_minute"],
            "evaluator_busy_fraction": round(self.busy_s / (self.wall_s * self.actors), 3)
            if self.wall_s > 0
            else 0.0,
            "timing_lane_busy_fraction": whole["timing_lane_busy_fraction"],
            "cpu_utilization": whole["cpu_utilization"],
            "gpu_utilization_mean_pct": whole["gpu_utilization_mean_pct"],
            "seconds_per_evaluation_by_phase": whole["seconds_per_evaluation_by_phase"],
            "steady": self.steady.as_dict(self.gpu) if self.steady else None,
            "best_speedup": {b.problem: _round(b.speedup, 3) for b in self.best},
            "best": [
                {
                    "problem": b.problem,
                    "speedup": _round(b.speedup, 3),
                    "peer": b.peer,
                    "speedup_fp32": _round(b.speedup_fp32, 3),
                }
                for b in self.best
            ],
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
