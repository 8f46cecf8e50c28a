"""Shared test set-up: one build/baseline cache per checkout, GPU tests skip without a GPU,
and no process the run started outlives it."""

from __future__ import annotations

import gc
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from kforge_search.procs.tree import command_line, end_all, marked

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("KFORGE_CACHE_DIR", str(ROOT / ".kforge-cache"))
SESSION_PYCACHE = Path(os.environ["KFORGE_CACHE_DIR"]).absolute() / "pycache"  # paths.py
RUN_MARK = "KFORGE_TEST_RUN"  # every process this test run starts carries it (tree.marked)
os.environ[RUN_MARK] = uuid.uuid4().hex
LEFTOVER_WAIT_S = 15.0  # for what is ending: Ray's processes, keepers whose evaluator went

PROBLEMS = ROOT / "problems"
EXAMPLES = ROOT / "examples" / "candidates"
BROKEN = ROOT / "tests" / "fixtures" / "broken"
FOREIGN_SUITE = ROOT / "tests" / "fixtures" / "foreign_suite"


def own_cache(folder: Path) -> Path:
    """`folder` as a kforge cache of a test's own (KFORGE_CACHE_DIR: no baseline, reference
    or build cached in it) that shares the session's compiled bytecode. Its children read
    bytecode from the cache's pycache only (PYTHONPYCACHEPREFIX): an empty one made each
    compile torch's modules again (test_devicelock's reference: 27.5 -> 19.6 s alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    SESSION_PYCACHE.mkdir(parents=True, exist_ok=True)
    (folder / "pycache").symlink_to(SESSION_PYCACHE, target_is_directory=True)
    return folder


CHAIN = "level1/10_elementwise_chain"  # its name, as the lock journal's labels give it


def evaluate_chain(config, platform: str):
    """CHAIN (ci sizes) evaluated once with its example Triton candidate on `platform`, by a
    fresh evaluator; the result, asserted OK."""
    from kforge_search.evaluator import Evaluator, Status
    from kforge_search.platforms import get_platform
    from kforge_search.problem import resolve_problem

    problem = resolve_problem(CHAIN, size_set="ci")
    evaluator = Evaluator(config)
    try:
        result = evaluator.evaluate(
            EXAMPLES / "triton/elementwise_chain.py", problem, get_platform(platform)
        )
    finally:
        evaluator.close()
    assert result.status is Status.OK, result.message
    return result


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# Files whose tests take the longest (the search CLI's: 150-360 s on 2 CPUs): under
# pytest-xdist they go first, so that one worker runs them while the other runs the rest
# (last in collection order, one worker ran the longest alone at the end)
LONGEST = ("tests/search/test_search_cli.py", "tests/evaluator/test_devicelock.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests skip without a GPU. Tests marked slow (exhaustive agent sweeps, one C++ build
    per attack, files with hard-coded sizes, and those tests/slow_tests.txt lists) run only
    when asked for: `-m slow` (any -m
    expression), or KFORGE_SLOW=1 (`make test-all`); the default run stays within CI's time."""
    wanted = bool(config.getoption("markexpr")) or os.environ.get("KFORGE_SLOW") == "1"
    listed = slow_list()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the longest first, beside the rest
        items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the device)")
    slow = pytest.mark.skip(reason="slow: run with -m slow or KFORGE_SLOW=1 (make test-all)")
    gpu = _has_gpu()
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(no_gpu)
        elif "slow" in item.keywords and not wanted:
            item.add_marker(slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The C++ extensions the tests to run need, built first, two at a time (prebuild.py)."""
    if session.config.option.collectonly:
        return
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return  # under pytest-xdist the first worker builds; the others find them built
    from tests import prebuild

    run = [item.nodeid for item in session.items if not item.get_closest_marker("skip")]
    specs = prebuild.needed(run)
    if not specs:
        return
    started = time.monotonic()
    failed = prebuild.build_all(specs)
    took = time.monotonic() - started
    print(f"\nprebuilt {len(specs) - len(failed)} of {len(specs)} C++ extensions in {took:.0f} s")
    for line in failed:  # the test that needs it builds it again and reports the error
        print(f"prebuild failed: {line}", file=sys.stderr)


SLOW_LIST = ROOT / "tests" / "slow_tests.txt"


def slow_list() -> set[str]:
    """The node ids tests/slow_tests.txt names (slow by their measured time)."""
    lines = SLOW_LIST.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A run that collects nothing is a broken run, not a pass: turn pytest's exit 5 into 1.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    left = _leftovers()
    if left:
        lines = "\n".join(f"  {pid}: {cmd[:160]}" for pid, cmd in left)
        print(
            f"\nError: {len(left)} process(es) this test run started are still alive "
            f"({RUN_MARK} in their environment; now killed):\n{lines}",
            file=sys.stderr,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _leftovers() -> list[tuple[int, str]]:
    """Processes of this run alive at its end, once evaluators still open are closed (their
    idle spares end with them) and what is ending has had LEFTOVER_WAIT_S to end."""
    pipeline = sys.modules.get("kforge_search.evaluator.pipeline")
    if pipeline is not None:
        for obj in gc.get_objects():
            if issubclass(type(obj), pipeline.Evaluator):  # type(): no attribute looked up
                obj.close()
    token = os.environ[RUN_MARK]
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    while (left := marked(RUN_MARK, token)) and time.monotonic() < deadline:
        time.sleep(0.2)
    found = [(pid, command_line(pid)) for pid in left]
    end_all(lambda: marked(RUN_MARK, token))
    return found
