"""A candidate's compile runs off the device lock (compiling.OffLane): the child's kernels end,
it says "aside", compiles, and waits at a safe point until the parent holds the lock again.
An autotuner's trials run kernels: they stay under the hold, the compiles inside them leave."""

from __future__ import annotations

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status, compiling
from kforge_search.evaluator.devicelock import JOURNAL_ENV, LOCK_DIR_ENV
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES, own_cache


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
    problem = resolve_problem("level1/10_elementwise_chain", size_set="ci")
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False, spare_child=False))
    try:
        result = evaluator.evaluate(
            EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cuda-triton")
        )
    finally:
        evaluator.close()
    assert result.status is Status.OK, result.message
    holds = [line.split() for line in journal.read_text().splitlines()]
    mine = [h for h in holds if h[4:] == [f"{problem.name}:candidate"]]
    modes = [h[1] for h in mine]
    first_timing = modes.index("exclusive")
    assert modes[:first_timing].count("shared") >= 2, mine
