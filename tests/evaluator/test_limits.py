"""Adaptive limits: the stages that call the model get max(floor, factor x the reference's
time per call x calls), never more than configured; a compile inside them is timed as a
build; a spinning candidate on a fast problem ends in seconds and the limits used are in its
result. Baselines whose spread shows interference are timed again and never cached."""

from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status, compiling
from kforge_search.evaluator.baselines import (
    BaselineCache,
    BaselineTimer,
    cache_key,
    settle,
    spread,
    time_again,
)
from kforge_search.evaluator.host_load import LoadProbe
from kforge_search.evaluator.limits import candidate_limits, scaled_s
from kforge_search.evaluator.result import TimingStats
from kforge_search.paths import cache_dir
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import BROKEN, EXAMPLES

CHAIN = "level1/10_elementwise_chain"


def test_a_stage_limit_scales_between_the_floor_and_the_configured_limit():
    assert scaled_s(120.0, 5.0, 50.0, 2.0, 7) == 5.0  # 0.7 s scaled: the floor
    assert scaled_s(120.0, 5.0, 50.0, 100.0, 7) == 35.0
    assert scaled_s(120.0, 5.0, 50.0, 1000.0, 7) == 120.0  # never above the configured


class _Job:
    total_trials, warmup, timed_runs = 7, 10, 50


def test_limits_scale_on_compiled_platforms_only_and_say_what_they_used():
    config = EvalConfig(verify_timeout_s=120, time_timeout_s=300, build_timeout_s=600)
    limits, used = candidate_limits(config, _Job(), 20.0, 40.0, scale=True)
    assert limits.timeout("verify") == 7.0  # 50 x 20 ms x 7 calls
    assert limits.timeout("time") == 60.0  # 50 x 20 ms x 60 calls
    assert limits.timeout("unseen") == 14.0  # from the unseen sizes' own reference
    assert limits.timeout("build") == 600 and limits.timeout("profile") == 180
    assert used.scaled and used.reference_ms == 20.0
    assert dict(used.stages) == {"build": 600, "verify": 7.0, "time": 60.0, "unseen": 14.0}
    fixed, used = candidate_limits(config, _Job(), 20.0, 40.0, scale=False)  # an interpreter
    assert fixed.timeout("verify") == 120 and not used.scaled
    off, used = candidate_limits(replace(config, limit_factor=0), _Job(), 20.0, 0.0, True)
    assert off.timeout("verify") == 120 and not used.scaled


def test_bad_limit_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="factor >= 0"):
        EvalConfig(limit_factor=-1)
    with pytest.raises(ValueError, match="spread limit >= 1"):
        EvalConfig(baseline_spread_limit=0.5)


class Compiler:
    """Stands for Triton's JIT: compile() may call itself (an autotuner compiling configs)."""

    def compile(self, depth: int) -> int:
        return self.compile(depth - 1) if depth else 7


def test_compiles_are_announced_once_per_outermost_call():
    sent = []
    target = (("tests.evaluator.test_limits", "Compiler", "compile"),)
    compiling.announce(lambda kind, **f: sent.append((kind, f)), target)
    compiling.announce(lambda kind, **f: sent.append(("twice", f)), target)  # not wrapped again
    assert Compiler().compile(3) == 7
    assert sent == [("compiling", {"on": True}), ("compiling", {"on": False})]


def test_a_spinning_candidate_on_a_fast_problem_ends_in_seconds():
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))  # verify: 120 s
    try:
        result = evaluator.evaluate(
            BROKEN / "cpu_cpp/infinite_loop.py",
            resolve_problem(CHAIN, size_set="ci"),
            get_platform("cpu-cpp"),
        )
    finally:
        evaluator.close()
    assert result.status is Status.TIMEOUT and result.stage == "verify", result.message
    limits = dict(result.limits.stages)
    assert result.limits.scaled and limits["verify"] == 5.0, result.limits
    assert 5.0 <= dict(result.phases)["verify"] < 15.0, result.phases
    assert result.to_dict()["limits"]["stages"]["verify"] == 5.0


def _timing(p20: float, p50: float, p80: float) -> TimingStats:
    return TimingStats("perf_counter", 50, p20, p50, p80)


def test_a_noisy_spread_is_timed_again_and_the_fastest_try_kept_as_noisy():
    quiet, loud, louder = _timing(1.0, 1.1, 1.2), _timing(0.9, 2.0, 9.0), _timing(1.0, 3.0, 9.0)
    assert spread(quiet) == pytest.approx(1.2) and spread(loud) == 10.0
    assert time_again([loud], 1.5, 3) and not time_again([loud, loud, loud], 1.5, 3)
    assert not time_again([quiet], 1.5, 3)
    clean = settle("eager", [loud, quiet], 1.5)
    assert clean.timing == quiet and clean.tries == 2 and not clean.noisy
    noisy = settle("eager", [louder, loud, louder], 1.5)
    assert noisy.timing == loud and noisy.tries == 3 and noisy.noisy


class _FakeChild:
    """A baseline child's events, as a script; records what the parent sends it."""

    def __init__(self, events):
        self.events, self.sent = list(events), []
        self.pid = os.getpid()  # the host's load is probed around its timings (host_load.py)

    def next_event(self):
        return self.events.pop(0) if self.events else None

    def send(self, line: str) -> None:
        self.sent.append(line)

    def resume_after(self, wait, line: str = "go") -> None:
        wait()
        self.sent.append(line)


@pytest.fixture
def quiet_host(monkeypatch):
    """The timer's logic alone: the host's other load reads as none (host_load.py's own
    tests measure it)."""
    monkeypatch.setattr(LoadProbe, "others", lambda self, extend=False: 0.0)


def test_the_baseline_timer_asks_again_while_noisy_and_not_past_its_tries(quiet_host):
    def timed(kind, t):
        return {"type": "baseline", "kind": kind, "ok": True, "timing": t.__dict__}

    loud, quiet = _timing(0.5, 1.0, 5.0), _timing(1.0, 1.05, 1.1)
    child = _FakeChild(
        [{"type": "warm", "kind": "eager"}, timed("eager", loud), timed("eager", quiet),
         {"type": "warm", "kind": "compile"}, timed("compile", loud), timed("compile", loud),
         {"type": "timed"}]
    )  # fmt: skip
    holds = []
    timer = BaselineTimer(("eager", "compile"), 1.5, 2)
    timer.drive(child, holds.append)
    assert child.sent == ["time", "time", "next", "time", "time", "next"]
    # exclusive from the first kind's timed runs to the end of the last's: one hold
    assert holds == [True, True, False]
    eager, compiled = timer.results("ended")
    assert eager.timing == quiet and eager.tries == 2 and not eager.noisy
    assert compiled.timing == loud and compiled.tries == 2 and compiled.noisy


def test_between_two_kinds_the_baseline_timer_lets_a_waiting_timing_go(quiet_host):
    done = {"type": "baseline", "kind": "eager", "ok": True, "timing": _timing(1, 1, 1).__dict__}
    child = _FakeChild(
        [{"type": "pause", "kind": "compile"}, {"type": "warm", "kind": "eager"}, done,
         {"type": "timed"}]
    )  # fmt: skip
    holds, pauses = [], []
    timer = BaselineTimer(("eager",), 1.5, 2)
    timer.drive(child, holds.append, lambda: pauses.append("yield"))
    assert pauses == ["yield"] and child.sent == ["go", "time", "next"]
    assert holds == [True, False]


def test_a_noisy_baseline_is_used_but_not_cached_and_a_clean_one_is():
    problem = resolve_problem(CHAIN, size_set="ci")
    platform = get_platform("cpu-cpp")
    seed = random.randrange(10**6, 10**7)  # a cache key of this test's own
    # a spread limit of 1.0 calls every real timing noisy: a parameter, no patching
    noisy = Evaluator(EvalConfig(seed=seed, baselines=("eager",), check_unseen=False,
                                 baseline_spread_limit=1.0, baseline_tries=2))  # fmt: skip
    clean = Evaluator(replace(noisy.config, baseline_spread_limit=1e9))
    honest = EXAMPLES / "cpu_cpp/elementwise_chain.py"
    try:
        first = noisy.evaluate(honest, problem, platform)
        assert first.status is Status.OK, first.message
        (eager,) = [b for b in first.baselines if b.kind == "eager"]  # beside reduced kinds
        assert eager.ok and eager.noisy and eager.tries == 2 and not eager.cached
        key = cache_key(problem, platform.name, first.device_name, first.torch_version,
                        noisy.config)  # fmt: skip
        cache = BaselineCache(cache_dir() / "baselines.json")
        assert cache.get(key, "eager") is None
        second = clean.evaluate(honest, problem, platform)
        (again,) = [b for b in second.baselines if b.kind == "eager"]
        assert again.tries == 1 and not again.noisy
        assert cache.get(key, "eager") is not None  # clean: cached
        third = clean.evaluate(honest, problem, platform)
        assert next(b for b in third.baselines if b.kind == "eager").cached
    finally:
        noisy.close()
        clean.close()


def test_compile_threads_must_not_be_negative():
    with pytest.raises(ValueError, match="compile_threads"):
        EvalConfig(compile_threads=-1)
    assert EvalConfig(compile_threads=2).compile_threads == 2


def test_a_baseline_compile_steps_off_the_lane_and_comes_back_before_it_runs(quiet_host):
    """The child's compile is announced ("aside": the evaluator lets its shared hold go)
    and followed by a safe point ("pause": the hold back, behind a waiting timing) before
    the compiled graph runs; the timer passes both on."""
    done = {"type": "baseline", "kind": "compile", "ok": True, "timing": _timing(1, 1, 1).__dict__}
    child = _FakeChild(
        [{"type": "aside"}, {"type": "pause", "back": "compiled"},
         {"type": "warm", "kind": "compile"}, done, {"type": "timed"}]
    )  # fmt: skip
    calls = []
    timer = BaselineTimer(("compile",), 1.5, 2)
    timer.drive(child, calls.append, lambda: calls.append("back"), lambda: calls.append("aside"))
    assert calls == ["aside", "back", True, False] and child.sent == ["go", "time", "next"]
