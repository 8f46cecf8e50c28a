"""Spares forked from a warm zygote (evaluator/zygote.py): real evaluations on cpu-triton,
the process tree they leave, a crash's status through the zygote, and its end."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from kforge_search.evaluator import EvalConfig, Evaluator, Status, spare
from kforge_search.evaluator.forked import ForkedProc
from kforge_search.evaluator.sandbox import child_env
from kforge_search.evaluator.zygote import Zygote, probe
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.procs import tree
from tests.conftest import EXAMPLES
from tests.evaluator.test_faults import TEMPLATE

CHAIN = "level1/10_elementwise_chain"
CRASH = TEMPLATE.format(before="", inside="ctypes.string_at(0)")  # SIGSEGV in forward


def _warm(zygote: Zygote, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not zygote.warm():
        assert zygote.alive(), "the zygote ended while it warmed up"
        assert time.monotonic() < deadline, "the zygote did not warm up"
        time.sleep(0.1)


def _below(keeper: int) -> list[int]:
    """The spare below a forked keeper, once the keeper has forked it."""
    deadline = time.monotonic() + 10
    while not (found := tree.descendants(keeper)):
        assert time.monotonic() < deadline, "the keeper has no spare below it"
        time.sleep(0.05)
    return found


def _alive(pid: int) -> bool:
    proc = tree.read_proc(pid)
    return proc is not None and proc.state != "Z"


@pytest.mark.parametrize(
    "platform_name", ["cpu-triton", pytest.param("cuda-triton", marks=pytest.mark.gpu)]
)
def test_a_forked_spare_runs_the_next_candidate(tmp_path: Path, platform_name: str) -> None:
    """On a GPU the spare creates its CUDA context after the fork (the zygote has none)."""
    # python_guards off: the crash goes through ctypes (as test_faults.py's)
    evaluator = Evaluator(EvalConfig(baselines=(), zygote=True, python_guards=False))
    problem = resolve_problem(CHAIN, size_set="ci")
    platform = get_platform(platform_name)
    source = EXAMPLES / "triton/elementwise_chain.py"
    try:
        for _ in range(10):  # the first spares start as interpreters (spare.ZYGOTE_AFTER, warm-up)
            assert evaluator.evaluate(source, problem, platform).ok
            (spare,) = evaluator.spare_pids()
            chain = evaluator.zygote_pids()
            if len(chain) == 3 and tree.read_proc(spare).ppid == chain[2]:
                break
        else:
            pytest.fail("no spare came from the zygote")
        stub, keeper, zygote_pid = chain
        assert tree.read_proc(zygote_pid).ppid == keeper and tree.read_proc(keeper).ppid == stub
        result = evaluator.evaluate(source, problem, platform)  # in the forked spare
        assert result.status is Status.OK and result.generalizes == "yes", (
            result.message + "\n" + result.artifacts.output_tail
        )
        phases = dict(result.phases)
        assert phases.get("start", 0.0) + phases.get("setup", 0.0) < 0.5, phases
        assert not _alive(spare)  # one candidate per process
        crash = tmp_path / "crash.py"
        crash.write_text(CRASH)
        crashed = evaluator.evaluate(crash, problem, platform)
        assert crashed.status is not Status.OK
        assert "SIGSEGV" in crashed.message, crashed.message  # its status, through the zygote
    finally:
        evaluator.close()
    assert evaluator.zygote_pids() == [] and not _alive(zygote_pid) and not _alive(keeper)


def test_the_zygote_and_what_it_forked_end_with_its_socket() -> None:
    zygote = Zygote("cpu", child_env({}))
    try:
        _warm(zygote)
        spawned = zygote.fork()
        assert spawned is not None and spawned.proc.poll() is None
        (chain_pid,) = zygote.pids()[2:]
        spare = _below(spawned.proc.pid)
        zygote._ctl.close()  # the evaluator went: the zygote, its keepers and spares end
        deadline = time.monotonic() + 10
        while _alive(chain_pid) or any(map(_alive, spare)):
            assert time.monotonic() < deadline, "the zygote's processes outlived its socket"
            time.sleep(0.1)
        assert spawned.proc.wait(timeout=5) != 0  # no status: read as killed
    finally:
        zygote.close()


@pytest.mark.parametrize("how", ["term", "kill"])
def test_ending_a_forked_spare_reports_how_it_ended(how: str) -> None:
    zygote = Zygote("cpu", child_env({}))
    try:
        _warm(zygote)
        spawned = zygote.fork()
        assert spawned is not None
        below = _below(spawned.proc.pid)
        if how == "term":
            spawned.kill()  # the evaluator's end_tree: SIGTERM to the keeper, then the token
            assert spawned.proc.returncode is not None
        else:
            os.killpg(spawned.proc.pid, signal.SIGKILL)  # its process group: keeper and spare
            assert spawned.proc.wait(timeout=10) == -signal.SIGKILL
        with pytest.raises(subprocess.TimeoutExpired):
            zygote.spawned.proc.wait(timeout=0.2)  # the zygote itself goes on
        assert not any(map(_alive, below))
        assert zygote.fork() is not None  # and forks again
    finally:
        zygote.close()


def test_a_probe_fork_says_what_a_fork_would_meet() -> None:
    assert probe(lambda: "") == ""
    assert probe(lambda: "no CUDA here") == "no CUDA here"
    assert probe(lambda: 1 / 0).startswith("the probe fork failed")  # type: ignore[arg-type,return-value]


@pytest.mark.skipif(torch.cuda.is_available(), reason="here a fork gets CUDA")
def test_a_zygote_whose_forks_get_no_cuda_says_why_and_spares_start_as_interpreters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a machine without CUDA a zygote for cuda:0 stands for one whose forks get none (on
    the H100 every forked spare exited before its job when the zygote's imports had
    initialized CUDA): it says so instead of "ready", and its evaluator's spares start as
    their own interpreters, with no second zygote."""
    monkeypatch.setattr(spare, "ZYGOTE_AFTER", 1)
    spares, env = spare.Spares(zygote=True), child_env({})
    try:
        spares.prepare("cuda:0", env)  # starts the zygote; this spare is an interpreter
        (zygote,) = spares._zygotes.values()
        deadline = time.monotonic() + 120
        while not zygote.unfit:
            assert not zygote.warm(), "a zygote for cuda:0 said ready on a machine without CUDA"
            assert time.monotonic() < deadline, "the zygote said nothing"
            time.sleep(0.1)
        assert "CUDA" in zygote.unfit or "cuda" in zygote.unfit, zygote.unfit
        first = spares.take("cuda:0", env)
        assert first is not None
        first.kill()
        spares.prepare("cuda:0", env)
        again = spares.take("cuda:0", env)
        assert again is not None and not isinstance(again.proc, ForkedProc)
        again.kill()
        assert list(spares._zygotes.values()) == [zygote]
    finally:
        spares.close()
