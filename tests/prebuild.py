"""The C++ extensions a test run needs, built before its first test, two at a time.

A build takes 30 to 50 s of one core (g++ on torch's headers). Each test that needs one would
build it on first use, one after another, with the second core idle; built here first, in
parallel, into the cache the evaluator uses (KFORGE_CACHE_DIR/torch_extensions, keyed by
source, name and flags: evaluator/build.py), the test finds it built. Nothing else runs beside
the builds: a build beside a timing would load the host (evaluator/host_load.py).

`python -m tests.prebuild SPEC` builds one: a candidate file's path, or BUILTIN (the builtin
agent's C++ library, rendered by the agent as it is now)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = "BUILTIN"
PARALLEL = 2  # the CI machine's cores
LIMIT_S = 600.0  # each build's; the evaluator's own build limit (EvalConfig.build_timeout_s)


@dataclass(frozen=True)
class Prebuild:
    """One extension build and the tests (node id prefixes) that need it."""

    spec: str  # a candidate file relative to the repository root, or BUILTIN
    needed_by: tuple[str, ...]


PREBUILDS = (
    Prebuild(
        "tests/adversarial/candidates/27b_float64_dgemm.py",  # every 27* shares this build
        ("tests/adversarial/test_native_compute.py::test_library_compute_is_refused",),
    ),
    Prebuild(
        BUILTIN,
        (
            "tests/agents/builtin/test_cpp.py",
            "tests/agents/builtin/test_evaluator.py",
            "tests/agents/builtin/test_dtypes.py",
            "tests/search/",
        ),
    ),
    Prebuild(
        "tests/fixtures/broken/cpu_cpp/nan_output.py",  # every kforge_fixture_chain fixture
        ("tests/evaluator/test_broken.py::test_broken_candidate_gets_its_status[cpu-cpp-",),
    ),
    Prebuild(
        "examples/candidates/cpu_cpp/elementwise_chain.py",
        ("tests/evaluator/test_honest.py::test_honest_candidate_is_ok[cpu-cpp-cpu_cpp/elem",),
    ),
)


def needed(node_ids: Iterable[str]) -> list[str]:
    """The specs of the builds that the tests to run need, in PREBUILDS's order."""
    ids = list(node_ids)
    return [p.spec for p in PREBUILDS if any(i.startswith(p.needed_by) for i in ids)]


def build_all(specs: Sequence[str], parallel: int = PARALLEL) -> list[str]:
    """Build each spec in a process of its own, `parallel` at a time; what failed, and why
    (the test that needs it then builds it and reports its own error)."""
    waiting, running, failed = list(specs), [], []
    with contextlib.ExitStack() as files:
        while waiting or running:
            while waiting and len(running) < parallel:
                spec = waiting.pop(0)
                cmd = [sys.executable, "-m", "tests.prebuild", spec]
                # stderr to a file, not a pipe: a compiler's warnings past the pipe's buffer
                # would block the build until LIMIT_S, as nothing reads the pipe meanwhile
                err = files.enter_context(tempfile.TemporaryFile(mode="w+"))
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
                running.append((spec, proc, err, time.monotonic()))
            time.sleep(0.2)
            for entry in list(running):
                spec, proc, err, started = entry
                if proc.poll() is None and time.monotonic() - started < LIMIT_S:
                    continue
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                err.seek(0)
                if proc.returncode:
                    failed.append(f"{spec}: exit {proc.returncode}: {err.read().strip()[-300:]}")
                running.remove(entry)
    return failed


def build(spec: str) -> None:
    """Import the candidate (its load_inline builds the extension) with the evaluator's
    build cache installed."""
    from kforge_search.evaluator.build import cache_cpp_builds, load_candidate_class
    from kforge_search.paths import cache_dir

    cache_cpp_builds(cache_dir() / "torch_extensions")
    if spec != BUILTIN:
        load_candidate_class(str(ROOT / spec))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "builtin_cpp.py"
        path.write_text(_builtin_source())
        load_candidate_class(str(path))


def _builtin_source() -> str:
    from kforge_search.agents.builtin import BuiltinAgent, CppGenome
    from kforge_search.platforms import get_platform
    from kforge_search.problem import resolve_problem

    problem = resolve_problem("level2/01_gemm_bias_relu", size_set="ci")
    draft = BuiltinAgent().synthesize(problem, get_platform("cpu-cpp"), CppGenome(), "prebuild")
    return draft.source


if __name__ == "__main__":
    build(sys.argv[1])
