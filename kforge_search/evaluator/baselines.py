"""Baselines (the reference in eager mode and under torch.compile), cached on disk.

The cache key is (problem id, sizes, platform, device name, torch version, timing settings).
A baseline timed while something else ran on the machine (its runs' p80/p20 above a bound,
or other processes keeping cores busy meanwhile: host_load.py) is timed again, in the same
process, a few times; one whose every try stays noisy is used (its fastest try) but never
cached, so a loaded moment does not set every later speedup. (A steady load slows every run
alike: its spread stays tight, and only the host's other load shows it.) Likewise a kind that
ran out of device memory is never cached (nor read from the cache: `out_of_memory`): beside
other processes (a bench's other jobs) it failed for the device's moment, not the problem, and
its evaluator measures it again alone (pipeline.Evaluator.baselines).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from kforge_search.evaluator import cache_seal
from kforge_search.evaluator.host_load import LoadProbe, bent, host_timed
from kforge_search.evaluator.result import Baseline, PeerCheck, TimingStats


def cache_key(
    problem: Any, platform: str, device_name: str, torch_version: str, config: Any
) -> str:
    """A problem's baselines' key: what changes their times (the device, torch, the timing
    settings and method) or their checks (the verification trials, the peers' rules, the
    unseen sizes they are also checked at where `config` checks candidates there)."""
    from kforge_search.evaluator import peers
    from kforge_search.evaluator.timing import TIMING_VERSION

    unseen = config.unseen_sizes(problem)
    parts = (
        problem.id, problem.sizes_key, platform, device_name, torch_version, config.seed,
        config.warmup, config.timed_runs, TIMING_VERSION, config.trials, peers.VERSION,
        unseen.sizes_key if unseen is not None else "",
    )  # fmt: skip
    return "|".join(str(p) for p in parts)


def unseen_job(unseen: Any, folder: Path) -> tuple[dict[str, Any], str]:
    """A baseline job's fields for the kinds' checks at the problem's unseen sizes (the
    unseen Problem, its reference's outputs saved in `folder` for the child) and the
    Baseline.unseen they get; `unseen`: (Problem, Reference), the evaluator's (not computed
    again), or None. A streamed unseen reference is not saved, as a streamed one at the
    problem's sizes (the parent holds neither): the kinds go unchecked there (peers.STREAMED:
    a reduced kind is then no peer, an fp32 one stays admissible, peers.refusal)."""
    from kforge_search.evaluator import peers

    if unseen is None:
        return {}, ""
    problem, ref = unseen
    if ref.streamed is not None:
        return {}, peers.STREAMED
    n = ref.numerics
    path = n.save_for_child(ref.outputs, ref.buffers, ref.scales, folder, "unseen-reference.pt")
    return {"unseen": problem, "unseen_reference_path": path}, peers.CHECKED


class BaselineCache:
    """On disk, each entry sealed by the evaluators' key (cache_seal.py): an entry something
    else wrote is not used (`tampered` says which). A noisy baseline (timed under
    interference) is kept only in memory, for a while."""

    def __init__(self, path: Path):
        self.path = path
        self._noisy: dict[tuple[str, str], tuple[float, Baseline]] = {}
        self._key = cache_seal.load_key(path.parent)
        self.tampered: list[str] = []  # "key kind" of entries whose seal did not match

    def _load(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str, kind: str) -> Baseline | None:
        entry = self._load().get(key, {}).get(kind)
        if entry is not None and not entry["ok"] and out_of_memory(entry.get("error", "")):
            entry = None  # written by an earlier version: measured again
        if entry is not None and not cache_seal.intact(
            self._key, f"{key}|{kind}", {k: v for k, v in entry.items() if k != "seal"},
            entry.get("seal"),
        ):  # fmt: skip
            self.tampered.append(f"{key} {kind}")
            entry = None
        if entry is None:
            measured, noisy = self._noisy.get((key, kind), (0.0, None))
            return noisy if time.monotonic() - measured < NOISY_REUSE_S else None
        timing = TimingStats(**entry["timing"]) if entry.get("timing") else None
        checks = tuple(PeerCheck(**c) for c in entry.get("checks", ()))
        return Baseline(kind, entry["ok"], timing, entry.get("error", ""), cached=True,
                        checks=checks, note=entry.get("note", ""),
                        unseen=entry.get("unseen", ""))  # fmt: skip

    def take_tampered(self) -> list[str]:
        """The tampered entries found since the last call (then forgotten)."""
        found, self.tampered = self.tampered, []
        return found

    def put(self, key: str, baseline: Baseline) -> None:
        if transient(baseline):  # the next evaluation measures it again
            return
        if baseline.noisy:  # a loaded moment must not set every later speedup
            self._noisy[(key, baseline.kind)] = (time.monotonic(), baseline)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # writers take turns, so none loses another's entry between its load and its write
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            entry = asdict(replace(baseline, cached=False))
            entry["seal"] = cache_seal.seal(self._key, f"{key}|{baseline.kind}", entry)
            data.setdefault(key, {})[baseline.kind] = entry
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1)
            os.replace(tmp, self.path)  # atomic: readers never see a half-written file


OUT_OF_MEMORY = ("OutOfMemoryError", "CUDA out of memory")  # in a failed kind's error


def out_of_memory(error: str) -> bool:
    """Whether a failed kind's error says the device ran out of memory."""
    return any(mark in error for mark in OUT_OF_MEMORY)


def transient(baseline: Baseline) -> bool:
    """A failure that says nothing lasting about the problem: out of memory beside other
    processes (`busy`), or out of memory at all (an entry of an earlier version, which could
    not tell the two apart; BaselineCache.get reads none)."""
    return not baseline.ok and (baseline.busy or out_of_memory(baseline.error))


def busy_kinds(baselines: Sequence[Baseline]) -> tuple[str, ...]:
    """The kinds to measure again with the device to ourselves: failed beside others."""
    return tuple(b.kind for b in baselines if not b.ok and b.busy)


def retried(first: Sequence[Baseline], again: Sequence[Baseline]) -> list[Baseline]:
    """`first`, each kind measured `again` replaced by its second measurement."""
    second = {b.kind: b for b in again}
    return [second.get(b.kind, b) for b in first]


SPREAD_LIMIT = 1.5  # p80/p20 of a baseline's timed runs above this: something interfered
NOISY_REUSE_S = 300.0  # a noisy baseline is reused in memory this long, then timed again


def spread(timing: TimingStats) -> float:
    """p80 over p20 of the timed runs: near 1 when nothing else ran beside them."""
    return timing.p80_ms / timing.p20_ms if timing.p20_ms > 0 else float("inf")


def clean(timing: TimingStats, limit: float) -> bool:
    """Timed with nothing else beside it: a tight spread, and the host's other processes
    below host_load.loaded's bound."""
    return spread(timing) <= limit and not bent(timing)


def time_again(tries: list[TimingStats], limit: float, max_tries: int) -> bool:
    """Whether the last try shows interference and tries are left."""
    return bool(tries) and not clean(tries[-1], limit) and len(tries) < max_tries


def settle(kind: str, tries: list[TimingStats], limit: float) -> Baseline:
    """The baseline from its tries: the last one if it is clean (tries stop at the first
    clean one), else the fastest, marked noisy (not cached: BaselineCache.put)."""
    if clean(tries[-1], limit):
        return Baseline(kind, True, tries[-1], tries=len(tries))
    fastest = min(tries, key=lambda t: t.p50_ms)
    return Baseline(kind, True, fastest, tries=len(tries), noisy=True)


class BaselineTimer:
    """The parent's side of a baseline child: each kind warmed up, then timed alone on the
    device (and timed again while its spread shows interference), then settled."""

    def __init__(
        self,
        kinds: tuple[str, ...],
        limit: float,
        max_tries: int,
        method: str = "perf_counter",
        unseen: str = "",
    ):
        self.kinds, self.limit, self.max_tries = kinds, limit, max_tries
        self.unseen = unseen  # every kind's Baseline.unseen (unseen_job)
        self.method = method  # the platform's timing method: host-timed ones are probed
        self.tries: dict[str, list[TimingStats]] = {k: [] for k in kinds}
        self.failed: dict[str, str] = {}
        self.busy: set[str] = set()  # failed out of memory beside other processes
        # peers.check_kind's: at the problem's sizes, then at its unseen sizes
        self.checks: dict[str, tuple[tuple[PeerCheck, ...], str]] = {}

    def drive(
        self,
        child: Any,
        alone: Callable[[bool], None],
        pause: Callable[[], object] = bool,
        aside: Callable[[], object] = bool,
    ) -> None:
        """Events of the child (a sandbox.Child) until it ends; `alone(True)` before the
        first kind's timed runs, `alone(False)` after the last's ("timed": the child
        prepares every kind first, baseline_child.py, and times them in one hold);
        `pause()` between two kinds' preparations and after a compile (the lock's
        resume_work); `aside()` while a compile leaves the device alone (step_aside)."""
        probe: LoadProbe | None = None
        while (event := child.next_event()) is not None:
            if event["type"] == "aside":
                aside()
            elif event["type"] == "pause":
                child.resume_after(pause)
            elif event["type"] == "timed":
                alone(False)
            elif event["type"] == "check":  # against the reference (peers.py), before timing
                had, note = self.checks.get(event["kind"], ((), ""))
                checks = tuple(PeerCheck(**c) for c in event["checks"])
                self.checks[event["kind"]] = (had + checks, note or event.get("note", ""))
            elif event["type"] == "warm":  # compiled and warmed up: time it alone
                alone(True)
                probe = self._probe(child)  # what else the host ran meanwhile
                child.send("time")
            elif event["type"] == "baseline":
                kind = event["kind"]
                if event["ok"]:  # the child waits: "time" (again) or "next"
                    timing = TimingStats(**event["timing"])
                    others = probe.others(extend=True) if probe is not None else 0.0
                    self.tries[kind].append(replace(timing, host_others=round(others, 2)))
                    if time_again(self.tries[kind], self.limit, self.max_tries):
                        probe = self._probe(child)
                        child.send("time")
                        continue
                    child.send("next")
                else:
                    self.failed[kind] = event.get("error", "")
                    if event.get("busy"):
                        self.busy.add(kind)

    def _probe(self, child: Any) -> LoadProbe | None:
        return LoadProbe.start(child.pid) if host_timed(self.method) else None

    def results(self, why_ended: str) -> list[Baseline]:
        """One baseline per kind: settled from its tries, else why it has none (`busy`: out of
        memory beside other processes); with its checks against the reference (and the
        state of those at the unseen sizes)."""
        return [
            replace(
                settle(k, self.tries[k], self.limit)
                if self.tries[k]
                else Baseline(k, False, error=self.failed.get(k, why_ended), busy=k in self.busy),
                checks=self.checks.get(k, ((), ""))[0],
                note=self.checks.get(k, ((), ""))[1],
                unseen=self.unseen,
            )
            for k in self.kinds
        ]
