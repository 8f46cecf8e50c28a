"""A candidate's compile runs off the device lock (compiling.OffLane): the child's kernels end,
it says "aside", compiles, and waits at a safe point until the parent holds the lock again.
An autotuner's trials run kernels: they stay under the hold, the compiles inside them leave.
Files written (a trial's outputs, the chosen timed runs', an oracle's answer) are host work
too (Channel.host_work): off the lock, and every request after them is made under it."""

from __future__ import annotations

import itertools

import pytest

from kforge_search.evaluator import EvalConfig, compiling
from kforge_search.evaluator.channel import Channel
from kforge_search.evaluator.devicelock import JOURNAL_ENV, LOCK_DIR_ENV
from kforge_search.evaluator.oracle import Oracle
from kforge_search.evaluator.sandbox import EVENT_JOURNAL_ENV
from tests.conftest import CHAIN, evaluate_chain, own_cache


class Jit:
    """Stands for Triton: `compile` builds without the device, `bench` runs kernels (an
    autotuner's trials) and compiles each config it tries."""

    def __init__(self, log: list):
        self.log = log

    def compile(self, name: str) -> str:
        self.log.append(f"compile {name}")
        return name

    def bench(self, *names: str) -> int:
        self.log.append("bench")
        return len([self.compile(n) for n in names])


TARGETS = (
    ("tests.evaluator.test_compile_off_lane", "Jit", "compile"),
    ("tests.evaluator.test_compile_off_lane", "Jit", "bench"),
)


@pytest.fixture
def jit(monkeypatch):
    """Jit's methods as they were after each test (announce wraps them in place)."""
    monkeypatch.setattr(Jit, "compile", Jit.compile)
    monkeypatch.setattr(Jit, "bench", Jit.bench)
    log: list = []

    def send(kind: str, **fields) -> None:
        log.append(f"{kind} {'on' if fields.get('on') else 'off'}")

    lane = compiling.OffLane(lambda: log.append("aside"), lambda: log.append("back"))
    compiling.announce(send, TARGETS, lane, frozenset(TARGETS[:1]))
    return Jit(log)


def test_a_compile_leaves_the_lock_and_comes_back_after_its_build_clock_stops(jit):
    assert jit.compile("k") == "k"
    assert jit.log == ["compiling on", "aside", "compile k", "compiling off", "back"]


def test_an_autotuners_trials_stay_on_the_lock_and_each_compile_in_them_leaves(jit):
    assert jit.bench("a", "b") == 2
    assert jit.log == [
        "compiling on", "bench",
        "aside", "compile a", "back",
        "aside", "compile b", "back",
        "compiling off",
    ]  # fmt: skip


def test_without_an_off_lane_a_compile_is_only_announced(monkeypatch):
    monkeypatch.setattr(Jit, "compile", Jit.compile)
    log: list = []
    compiling.announce(lambda kind, **f: log.append(f["on"]), TARGETS[:1])
    Jit(log).compile("k")
    assert log == [True, "compile k", False]


def test_a_compile_that_raises_still_comes_back(monkeypatch):
    def broken(self, name):
        raise RuntimeError("no")

    monkeypatch.setattr(Jit, "compile", broken)
    log: list = []
    lane = compiling.OffLane(lambda: log.append("aside"), lambda: log.append("back"))
    compiling.announce(lambda kind, **f: log.append(f["on"]), TARGETS[:1], lane, frozenset(TARGETS))
    with pytest.raises(RuntimeError):
        Jit(log).compile("k")
    assert log == [True, "aside", False, "back"]


@pytest.mark.gpu
def test_on_a_gpu_the_triton_compile_is_outside_the_candidates_shared_holds(monkeypatch, tmp_path):
    """A fresh Triton cache: the candidate's kernel compiles at its first call, in the verify
    stage. The lock's journal then shows the candidate's shared hold let go for it and taken
    back (two shared holds or more before its timing), not one hold over the whole verify."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    # Triton's cache in it
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    journal = tmp_path / "journal"
    monkeypatch.setenv(JOURNAL_ENV, str(journal))
    evaluate_chain(EvalConfig(baselines=(), check_unseen=False, spare_child=False), "cuda-triton")
    holds = [line.split() for line in journal.read_text().splitlines()]
    mine = [h for h in holds if h[4:5] == [f"{CHAIN}:candidate"]]
    modes = [h[1] for h in mine]
    first_timing = modes.index("exclusive")
    assert modes[:first_timing].count("shared") >= 2, mine


@pytest.mark.parametrize(("device", "said"), [("cuda:0", ["aside"]), ("cpu", [])])
def test_host_work_is_said_on_a_gpu_only(tmp_path, device, said):
    """On the CPU the host is the device: its timed runs wait for a file written as well."""
    import json
    import os

    read, write = os.pipe()
    channel = Channel(write)
    channel.host_work(device)
    channel.send("done")
    with os.fdopen(read) as pipe:
        events = [json.loads(pipe.readline())["type"] for _ in range(1 + len(said))]
    assert events == [*said, "done"]


class _Events:
    """A child that has sent these events (Oracle._answer reads them in turn)."""

    def __init__(self, *events: dict):
        self.events, self.exit = list(events), None

    def next_event(self):
        return self.events.pop(0) if self.events else None


def test_an_oracles_aside_reaches_its_caller_before_its_answer(tmp_path):
    calls: list = []
    oracle = Oracle.__new__(Oracle)  # its child only: no process, no finalizer
    oracle.child = _Events({"type": "aside"}, {"type": "oracle", "path": "p"})
    oracle.crowded = False
    answer = oracle._answer("oracle", lambda: calls.append("aside"))
    assert (answer["path"], calls) == ("p", ["aside"])


@pytest.mark.gpu
@pytest.mark.parametrize("in_oracle", [False, True])
def test_on_a_gpu_files_are_written_off_the_lock_and_every_request_is_made_under_it(
    monkeypatch, tmp_path, in_oracle
):
    """Both journals of one evaluation (verify, time, the chosen runs' check against the
    oracle, the unseen sizes): where the parent compares the trials, each trial's file is
    written after an "aside" (so the candidate's shared holds are at least as many as its
    trials); where the oracle does, a trial's outputs go as handles, with no file and no
    aside; either way every line the parent sends its children (a trial's "next" or "ahead",
    "time", "unseen", an oracle's "trial" and "compare-runs") is sent while the evaluator
    holds the lock: no child's device work runs outside a hold."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    locks, events = tmp_path / "locks.txt", tmp_path / "events.txt"
    monkeypatch.setenv(JOURNAL_ENV, str(locks))
    monkeypatch.setenv(EVENT_JOURNAL_ENV, str(events))
    config = EvalConfig(baselines=(), spare_child=False, trials_in_oracle=in_oracle)
    evaluate_chain(config, "cuda-triton")
    holds = [line.split() for line in locks.read_text().splitlines()]
    spans = [(float(h[2]), float(h[3])) for h in holds]
    lines = [line.split(maxsplit=2) for line in events.read_text().splitlines()]
    sent = [(float(t), what[2:]) for _, t, what in lines if what.startswith("> ")]
    requests = ("next", "ahead", "trial", "time", "unseen", "runs", "compare-runs", "go")
    asked = [(t, w) for t, w in sent if w.split()[0] in requests]
    kinds = {w.split()[0] for _, w in asked}
    # the chosen runs' check: the oracle compares them ("compare-runs", the default:
    # EvalConfig.timed_check_in_oracle) or writes its own for the parent ("runs")
    assert kinds >= {"next", "time", "unseen"} and kinds & {"runs", "compare-runs"}, sent
    assert ("ahead" in kinds and "trial" in kinds) is in_oracle, sent
    unheld = [(t, w) for t, w in asked if not any(s <= t <= e for s, e in spans)]
    assert not unheld, (unheld, holds)
    trials = sum(1 for _, _, what in lines if what.startswith("trial"))
    # a trial's "aside" comes just before it (its child's file, written off the lock)
    pairs = itertools.pairwise(lines)
    asides = sum(1 for a, b in pairs if b[2].startswith("trial") and a[2].startswith("aside"))
    assert trials > 0 and asides == (0 if in_oracle else trials), lines
    mine = [h for h in holds if h[4:5] == [f"{CHAIN}:candidate"] and h[1] == "shared"]
    assert in_oracle or len(mine) >= trials, holds


def test_the_event_journal_says_how_long_each_trials_comparison_took(monkeypatch, tmp_path):
    """Each trial the parent compared has a `compared` line: the wait for the device's hold,
    the whole comparison and its parts (what made a first trial's comparison hold an H200
    0.44 s at the median, 3.5 s at most, while timings waited). A held reference's trial is
    compared after the child is told to run the next one (candidate_drive.py): `next`
    comes between the trial and its comparison's line."""
    monkeypatch.setenv("KFORGE_CACHE_DIR", str(own_cache(tmp_path / "cache")))
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    events = tmp_path / "events.txt"
    monkeypatch.setenv(EVENT_JOURNAL_ENV, str(events))
    evaluate_chain(EvalConfig(baselines=(), check_unseen=False, zygote=False), "cpu-triton")
    lines = [line.split(maxsplit=2)[2] for line in events.read_text().splitlines()]
    told = [what.split() for what in lines if what.startswith(("trial", "= compared", "> next"))]
    trials = [k for k, w in enumerate(told) if w[0] == "trial"]
    nexts = [k for k, w in enumerate(told) if w[:2] == [">", "next"]]
    compared = [k for k, w in enumerate(told) if w[:2] == ["=", "compared"]]
    assert trials and len(trials) == len(nexts) == len(compared), told
    for i, (t, n, c) in enumerate(zip(trials, nexts, compared, strict=True)):
        assert t < n < c, told  # the trial, the child told to go on, then its comparison
        assert told[c][2] == str(i), told
        parts = dict(field.split("=") for field in told[c][3:])
        assert set(parts) == {"wait", "add", "read", "placed", "compared"}, told[c]
        assert all(float(v) >= 0 for v in parts.values())
        assert float(parts["add"]) >= float(parts["read"]) + float(parts["compared"])
