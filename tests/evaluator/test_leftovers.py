"""Every process an evaluation starts ends with it: a compiler that hangs under ninja (which
runs its commands in process groups of their own), a sleeper double-forked through libc at
import, a process forked from C++, and everything, when the evaluator itself is killed.
Leftovers are looked for anywhere on the machine by a marker in their environment, not by
parentage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import ROOT
from tests.evaluator.test_faults import HANGING_COMPILE
from tests.procs.leftovers import left, named

CHAIN = "level1/10_elementwise_chain"
LEFTOVERS = ROOT / "tests" / "fixtures" / "leftovers"
MARK = "KFORGE_TEST_LEFTOVERS"
# python_guards off: the leftovers come from ctypes and os.fork, which the static rules would
# refuse before any process starts (tests/evaluator/test_pyaudit.py covers those)
CONFIG = EvalConfig(baselines=(), check_unseen=False, memory_limit_mb=2048, python_guards=False)


@pytest.fixture(scope="module")
def marked_evaluator() -> Iterator[tuple[Evaluator, str]]:
    """An evaluator whose every process (spares included) carries MARK=<token>."""
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    evaluator = Evaluator(CONFIG)
    try:
        yield evaluator, token
    finally:
        evaluator.close()
        del os.environ[MARK]
        assert left(MARK, token) == [], "the evaluator's own processes outlived close()"


def _evaluate(evaluator: Evaluator, path, platform: str):
    return evaluator.evaluate(path, resolve_problem(CHAIN, size_set="ci"), get_platform(platform))


def test_a_compile_hang_leaves_no_compiler_running(marked_evaluator, tmp_path):
    _, token = marked_evaluator
    path = tmp_path / "hang.py"
    path.write_text(HANGING_COMPILE)
    evaluator = Evaluator(replace(CONFIG, build_timeout_s=20))  # marked too
    try:
        result = _evaluate(evaluator, path, "cpu-cpp")
        assert result.status is Status.TIMEOUT and result.stage == "build", result.message
        spares = evaluator.helper_pids() + marked_evaluator[0].helper_pids()
        zygotes = evaluator.zygote_pids() + marked_evaluator[0].zygote_pids()
        assert left(MARK, token, spares, 0, zygotes) == []
    finally:
        evaluator.close()


def test_a_sleeper_double_forked_at_import_is_ended(marked_evaluator):
    evaluator, token = marked_evaluator
    result = _evaluate(evaluator, LEFTOVERS / "python_double_fork.py", "cpu-triton")
    assert result.status in {Status.OK, Status.REJECTED}, result.message
    assert left(MARK, token, evaluator.helper_pids(), 0, evaluator.zygote_pids()) == []


def test_a_process_forked_from_cpp_is_ended(marked_evaluator):
    evaluator, token = marked_evaluator
    result = _evaluate(evaluator, LEFTOVERS / "cpp_fork.py", "cpu-cpp")
    assert result.status is Status.REJECTED, result.message
    assert "dynamic:spawned-process" in result.artifacts.reasons
    assert left(MARK, token, evaluator.helper_pids(), 0, evaluator.zygote_pids()) == []


KILLED_EVALUATOR = """
import sys
from kforge_search.evaluator import EvalConfig, Evaluator
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

Evaluator(EvalConfig(baselines=(), check_unseen=False, build_timeout_s=300)).evaluate(
    sys.argv[1], resolve_problem("level1/10_elementwise_chain", size_set="ci"),
    get_platform("cpu-cpp"))
"""


def test_an_evaluator_killed_mid_build_leaves_nothing(tmp_path):
    """The evaluator gets SIGKILL while a candidate's compiler hangs (ninja -> sh -> c++ ->
    cc1plus): the keeper sees its parent go and ends the whole tree."""
    token = uuid.uuid4().hex
    path = tmp_path / "hang.py"
    path.write_text(HANGING_COMPILE)
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_EVALUATOR), str(path)],
        env={**os.environ, MARK: token},
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not named(MARK, token, "cc1plus") and time.monotonic() < deadline:
            assert proc.poll() is None, "the evaluator ended before its compile hung"
            time.sleep(0.2)
        assert named(MARK, token, "cc1plus"), "the hanging compile never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert left(MARK, token, wait_s=5) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
