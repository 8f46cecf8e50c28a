"""The keeper (procs/keeper.py) owns its command's whole tree: whatever the command leaves
behind (orphans in sessions of their own, processes that ignore SIGTERM) ends with it, when
it ends, when the evaluator asks, or when the evaluator is killed. Found afterwards by a
marker in their environment, anywhere on the machine, not by parentage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

from kforge_search.procs.tree import descendants, has_marker, marked, processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "KFORGE_TEST_KEEPER"

# a shell that leaves a sleeper in a session of its own (ignoring SIGTERM) and one in the
# background, then exits with $1 (or waits, with "wait")
LEAVES = (
    "(setsid sh -c 'trap \"\" TERM; sleep 300' &) ; sleep 301 & "
    'if [ "$1" = wait ]; then sleep 302; fi; exit "${1:-0}"'
)


def _env(token: str) -> dict[str, str]:
    return {**os.environ, MARK: token, "PYTHONPATH": ROOT}


def _keeper(token: str, *args: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-S", "-m", "kforge_search.procs.keeper", "sh", "-c", LEAVES, "x"]
    return subprocess.Popen([*cmd, *args], env=_env(token), start_new_session=True)


def _wait_for(token: str, count: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(found := marked(MARK, token)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _none_left(token: str, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := marked(MARK, token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_what_the_command_leaves_behind_ends_with_it_and_its_code_is_kept():
    token = uuid.uuid4().hex
    keeper = _keeper(token, "3")
    assert keeper.wait(timeout=20) == 3
    assert _none_left(token, timeout=0.5) == []


def test_asked_to_end_it_kills_the_tree_and_dies_of_sigkill_like_the_command():
    token = uuid.uuid4().hex
    keeper = _keeper(token, "wait")
    assert len(_wait_for(token, 6)) >= 6  # stub, keeper, sh, the sleepers, the setsid shell
    started = time.monotonic()
    keeper.send_signal(signal.SIGTERM)
    assert keeper.wait(timeout=20) == -signal.SIGKILL
    assert time.monotonic() - started < 5
    assert _none_left(token, timeout=0.5) == []


def test_a_command_killed_by_a_signal_is_reported_as_that_signal():
    cmd = [sys.executable, "-S", "-m", "kforge_search.procs.keeper", "sh", "-c", "kill -SEGV $$"]
    assert subprocess.run(cmd, env=_env("x")).returncode == -signal.SIGSEGV


def test_when_its_parent_is_killed_the_tree_ends():
    token = uuid.uuid4().hex
    keeper = " ".join([sys.executable, "-S", "-m", "kforge_search.procs.keeper"])
    parent = subprocess.Popen(
        ["sh", "-c", f'{keeper} sh -c "$0" x wait & wait', LEAVES],
        env=_env(token),
        start_new_session=True,
    )
    assert len(_wait_for(token, 7)) >= 7
    parent.kill()  # SIGKILL: the evaluator (here a shell) cannot clean up
    parent.wait()
    assert _none_left(token) == []


def test_when_the_keeper_itself_gets_sigkill_the_tree_ends():
    """A Ray worker kills its direct children with SIGKILL when its actor is killed: the
    process the evaluator started is a stub, and the keeper below it ends the tree."""
    token = uuid.uuid4().hex
    keeper = _keeper(token, "wait")
    assert len(_wait_for(token, 6)) >= 6  # stub, keeper, sh, the sleepers, the setsid shell
    keeper.kill()
    keeper.wait()
    assert _none_left(token) == []


def test_the_tree_helpers_see_ancestry_and_markers():
    token = uuid.uuid4().hex
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], env=_env(token))
    try:
        _wait_for(token, 2)
        procs = processes()
        below = descendants(os.getpid(), procs)
        assert child.pid in below and len([p for p in below if procs[p].ppid == child.pid]) == 1
        assert has_marker(child.pid, MARK, token) and not has_marker(child.pid, MARK, "other")
        assert os.getpid() not in marked(MARK, token)
    finally:
        child.kill()
        child.wait()
        for pid in marked(MARK, token):
            os.kill(pid, signal.SIGKILL)


def test_a_keeper_without_a_command_says_so():
    cmd = [sys.executable, "-S", "-m", "kforge_search.procs.keeper"]
    out = subprocess.run(cmd, env=_env("x"), capture_output=True, text=True)
    assert out.returncode == 2 and "Error: no command" in out.stderr
