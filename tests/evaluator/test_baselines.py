"""A baseline kind that ran out of device memory beside other processes (baselines.py): not
cached, read as absent where an earlier version cached it, and measured once more with the
device to ourselves (baseline_runs.BaselineRuns._measured)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, replace
from types import SimpleNamespace

from kforge_search.evaluator import cache_seal, peers
from kforge_search.evaluator.baselines import (
    BaselineCache,
    BaselineTimer,
    busy_kinds,
    cache_key,
    retried,
)
from kforge_search.evaluator.config import EvalConfig
from kforge_search.evaluator.pipeline import Evaluator
from kforge_search.evaluator.result import Baseline, PeerCheck, TimingStats
from kforge_search.problem import resolve_problem

OOM = (
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total "
    "capacity of 139.80 GiB of which 6.26 GiB is free. Process 932 has 60.00 GiB in use"
)
SAME = f"tf32 {peers.SAME}"  # a reduced precision that changes nothing: a lasting failure


def _timing(ms: float) -> TimingStats:
    return TimingStats("perf_counter", 50, ms, ms, ms)


def _earlier_entry(cache_folder, key: str, baseline: Baseline) -> dict:
    """An entry as an earlier version wrote it: sealed, without the `busy` field."""
    entry = {k: v for k, v in asdict(baseline).items() if k != "busy"}
    entry["seal"] = cache_seal.seal(cache_seal.load_key(cache_folder), f"{key}|{baseline.kind}",
                                    entry)  # fmt: skip
    return entry


def test_a_busy_failure_is_neither_written_nor_kept(tmp_path):
    path = tmp_path / "baselines.json"
    cache = BaselineCache(path)
    cache.put("k", Baseline("compile", False, error=OOM, busy=True))
    assert not path.exists() and cache.get("k", "compile") is None
    cache.put("k", Baseline("eager", True, _timing(1.0)))  # the file exists now
    cache.put("k", Baseline("compile", False, error="RuntimeError: busy", busy=True))
    assert set(json.loads(path.read_text())["k"]) == {"eager"}
    assert cache.get("k", "compile") is None


def test_an_out_of_memory_failure_on_disk_reads_as_absent(tmp_path):
    path = tmp_path / "baselines.json"
    old = Baseline("compile", False, error=OOM)
    plain = Baseline("eager", False, error="RuntimeError: CUDA error: an illegal memory access")
    data = {"k": {b.kind: _earlier_entry(tmp_path, "k", b) for b in (old, plain)}}
    path.write_text(json.dumps(data))
    cache = BaselineCache(path)
    assert cache.get("k", "compile") is None and cache.take_tampered() == []
    assert cache.get("k", "eager") == Baseline("eager", False, error=plain.error, cached=True)
    cache.put("k", Baseline("compile", True, _timing(2.0)))  # measured again: replaced
    found = cache.get("k", "compile")
    assert found is not None and found.ok and found.cached


def test_a_lasting_failure_is_still_cached(tmp_path):
    cache = BaselineCache(tmp_path / "baselines.json")
    same = Baseline("eager-tf32", False, error=SAME, note=peers.SAME)
    cache.put("k", same)
    found = BaselineCache(tmp_path / "baselines.json").get("k", "eager-tf32")
    assert found is not None and not found.ok and found.cached and not found.busy
    assert found.error == same.error and found.note == same.note


class _Child:
    """A baseline child's events, as a script."""

    def __init__(self, events):
        self.events, self.sent, self.pid = list(events), [], os.getpid()

    def next_event(self):
        return self.events.pop(0) if self.events else None

    def send(self, line: str) -> None:
        self.sent.append(line)


def test_the_timer_marks_a_kind_that_failed_beside_others_busy():
    child = _Child(
        [{"type": "baseline", "kind": "compile", "ok": False, "error": OOM, "busy": True},
         {"type": "baseline", "kind": "eager-tf32", "ok": False, "error": SAME},
         {"type": "baseline", "kind": "eager", "ok": False, "error": OOM, "busy": False},
         {"type": "timed"}]
    )  # fmt: skip
    timer = BaselineTimer(("compile", "eager-tf32", "eager", "compile-tf32"), 1.5, 2)
    timer.drive(child, lambda exclusive: None)
    compiled, same, eager, ended = timer.results("the child ended")
    assert not compiled.ok and compiled.busy and compiled.error == OOM
    assert not same.ok and not same.busy
    assert not eager.ok and not eager.busy  # its own: the device was not crowded
    assert not ended.ok and not ended.busy and ended.error == "the child ended"


def test_only_kinds_that_failed_beside_others_are_measured_again():
    ok = Baseline("eager", True, _timing(1.0))
    busy = Baseline("compile", False, error=OOM, busy=True)
    lasting = Baseline("eager-tf32", False, error=SAME)
    assert busy_kinds([ok, busy, lasting]) == ("compile",)
    assert busy_kinds([ok, lasting]) == ()
    again = Baseline("compile", True, _timing(0.5))
    assert retried([ok, busy, lasting], [again]) == [ok, again, lasting]


def _evaluator(answers):
    """Evaluator._measured over a recorded _run_baselines: each call's kinds and
    `exclusive`, answered from `answers` in turn."""
    calls = []

    def run(problem, platform, kinds, ref, exclusive=False, unseen=None):
        calls.append((kinds, exclusive))
        return [answers[len(calls) - 1][k] for k in kinds]

    return SimpleNamespace(_run_baselines=run), calls


def test_busy_kinds_are_measured_once_more_with_the_lock_exclusive_throughout():
    ok = Baseline("eager", True, _timing(1.0))
    busy = Baseline("compile", False, error=OOM, busy=True)
    again = Baseline("compile", True, _timing(0.5))
    this, calls = _evaluator([{"eager": ok, "compile": busy}, {"compile": again}])
    measured = Evaluator._measured(this, None, None, ("eager", "compile"), None)
    assert measured == [ok, again]
    assert calls == [(("eager", "compile"), False), (("compile",), True)]


def test_a_kind_busy_again_is_returned_busy_and_nothing_is_retried_without_need():
    busy = Baseline("compile", False, error=OOM, busy=True)
    this, calls = _evaluator([{"compile": busy}, {"compile": busy}])
    assert Evaluator._measured(this, None, None, ("compile",), None) == [busy]
    assert len(calls) == 2  # once more only
    ok = Baseline("eager", True, _timing(1.0))
    this, calls = _evaluator([{"eager": ok}])
    assert Evaluator._measured(this, None, None, ("eager",), None) == [ok]
    assert calls == [(("eager",), False)]
    assert Evaluator._measured(this, None, None, (), None) == [] and len(calls) == 1


class _Lock:
    """The device lock's modes, recorded."""

    def __init__(self) -> None:
        self.holds: list[bool] = []

    def hold(self, exclusive: bool) -> None:
        self.holds.append(exclusive)

    def resume_work(self) -> bool:
        return False

    def step_aside(self) -> None:
        pass


def _run_once(exclusive: bool) -> tuple[list[bool], list[bool]]:
    """Evaluator._run_baselines over a scripted child: its `_child` calls' `exclusive` and the
    timer's holds of the lock."""
    lock, children = _Lock(), []
    done = {"type": "baseline", "kind": "eager", "ok": True, "timing": asdict(_timing(1.0))}
    child = _Child([{"type": "warm", "kind": "eager"}, done, {"type": "timed"}])
    child.exit = SimpleNamespace(killed="", signal_name="", returncode=0, stage="x", output="")

    @contextlib.contextmanager
    def run_child(job, work, platform, exclusive=False):
        children.append(exclusive)
        yield child

    this = SimpleNamespace(
        _job=lambda *a, **kw: SimpleNamespace(device="cuda:0"),
        _lock=lambda device: lock,
        _child=run_child,
        config=SimpleNamespace(baseline_spread_limit=1e9, baseline_tries=1),
    )
    ref = SimpleNamespace(streamed=object(), footprint=None, numerics=SimpleNamespace(dropped=()))
    platform = SimpleNamespace(timing="cuda_events")  # not host-timed: no load probe
    (eager,) = Evaluator._run_baselines(this, None, platform, ("eager",), ref, exclusive)
    assert eager.ok and child.sent == ["time", "next"]
    return children, lock.holds


def test_measured_again_the_lock_stays_exclusive_after_the_timed_runs():
    assert _run_once(False) == ([False], [True, False])  # shared again after its timings
    assert _run_once(True) == ([True], [True, True])  # never let down to shared


def test_the_checks_at_the_unseen_sizes_join_those_at_the_problems_and_say_so():
    """The child's second "check" of a kind (at the unseen sizes: baseline_child.
    unseen_checked) adds to its first; every kind gets the state the parent gave the timer."""
    strict = {"policy": "strict", "passed": True, "max_abs_err": 1e-5, "max_rel_err": 1e-5,
              "mismatch": ""}  # fmt: skip
    unseen = {**strict, "passed": False, "mismatch": "trial 0 output 0: values", "unseen": True}
    child = _Child(
        [{"type": "check", "kind": "eager-tf32", "checks": [strict], "note": ""},
         {"type": "check", "kind": "eager-tf32", "checks": [unseen], "note": ""},
         {"type": "timed"}]
    )  # fmt: skip
    timer = BaselineTimer(("eager", "eager-tf32"), 1.5, 2, unseen=peers.CHECKED)
    timer.drive(child, lambda exclusive: None)
    eager, tf32 = timer.results("ended")
    assert eager.unseen == tf32.unseen == peers.CHECKED and eager.checks == ()
    assert tf32.check("strict").passed and not tf32.check("strict", unseen=True).passed


def test_the_unseen_sizes_are_in_the_cache_key_and_an_older_entry_reads_without_them(tmp_path):
    problem = resolve_problem("level2/09_gemm_sum", size_set="ci")
    keys = {cache_key(problem, "cpu-cpp", "cpu", "2.13", EvalConfig(check_unseen=on))
            for on in (True, False)}  # fmt: skip
    assert len(keys) == 2 and all(f"|{peers.VERSION}|" in k for k in keys)
    old = Baseline("eager-tf32", True, _timing(1.0), checks=(PeerCheck("strict", True),))
    entry = _earlier_entry(tmp_path, "k", old)
    del entry["unseen"], entry["checks"][0]["unseen"]  # as written before the unseen checks
    entry["seal"] = cache_seal.seal(cache_seal.load_key(tmp_path), "k|eager-tf32",
                                    {k: v for k, v in entry.items() if k != "seal"})  # fmt: skip
    (tmp_path / "baselines.json").write_text(json.dumps({"k": {"eager-tf32": entry}}))
    found = BaselineCache(tmp_path / "baselines.json").get("k", "eager-tf32")
    assert found == replace(old, cached=True) and found.unseen == ""
    assert not found.check("strict", unseen=True)
    cache = BaselineCache(tmp_path / "baselines.json")  # written and read back as it is
    checked = replace(old, checks=(*old.checks, PeerCheck("strict", False, unseen=True)),
                      unseen=peers.CHECKED)  # fmt: skip
    cache.put("k2", checked)
    assert cache.get("k2", "eager-tf32") == replace(checked, cached=True)
