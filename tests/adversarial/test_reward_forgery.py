"""Forging the reward through shared files (issue 20): candidates/21*.py rewrite the baseline
cache that speedups are computed from (directly, by a rename over it, through a hard link,
sealed again with the evaluators' key where they can read it), or break the build caches
that later candidates and the baselines share.

Each test runs in a cache folder of its own (KFORGE_CACHE_DIR), seeded with a baseline (written
as the evaluator writes them) and with the builds of others, so a trick that gets through
damages nothing but that folder. What must hold: the baseline a later evaluation reads is the
seeded one, or none at all (an entry something else wrote is not used: the evaluator times the
baseline again); the others' builds are unchanged; and the candidate is REJECTED
"sandbox:write-outside" unless its write to the baseline cache changed nothing it reads. A
case whose trick gets through today carries `finding`: its test is xfail (strict).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.baselines import BaselineCache
from kforge_search.evaluator.result import Baseline, TimingStats
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import own_cache

CANDIDATES = Path(__file__).resolve().parent / "candidates"
CHAIN = "level1/10_elementwise_chain"
REASON = "sandbox:write-outside"

# what a later evaluation would trust: a baseline, another candidate's build, a cached kernel
BASELINE_KEY = "level1_10_elementwise_chain|ci|cpu-cpp"
BASELINE = Baseline("eager", True, TimingStats("perf_counter", 50, 0.020, 0.021, 0.022))
BUILDS = {
    "torch_extensions/rival-0123456789abcdef/rival.so": b"\x7fELF a rival's build",
    "triton/0123456789abcdef/rival_kernel.cubin": b"a rival's compiled kernel",
}


class Case(NamedTuple):
    file: str
    finding: str = ""  # why the trick gets through today (the test is then xfail, strict)


CASES = [
    Case("21a_write_baseline_cache.py"),
    Case("21b_rename_over_baseline_cache.py"),
    Case("21c_hardlink_baseline_cache.py"),
    Case("21d_poison_extension_cache.py",
         "the whole torch_extensions folder is writable: a candidate overwrites other builds"),
    Case("21e_poison_triton_cache.py",
         "the whole Triton cache is writable: a candidate overwrites kernels others cached"),
    Case("21f_forge_sealed_baselines.py"),
]  # fmt: skip
FILES = frozenset(c.file for c in CASES)
BUILD_TRICKS = {"21d_poison_extension_cache.py", "21e_poison_triton_cache.py"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of the module's own (the session's bytecode shared: own_cache), in the
    environment while its evaluator runs."""
    root = own_cache(tmp_path_factory.mktemp("kforge-cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KFORGE_CACHE_DIR", str(root))
        yield root


@pytest.fixture(scope="module")
def evaluator(cache):
    made = Evaluator(EvalConfig(baselines=(), verify_timeout_s=60))
    yield made
    made.close()


def _seed(root: Path) -> None:
    (root / "baselines.json").unlink(missing_ok=True)
    BaselineCache(root / "baselines.json").put(BASELINE_KEY, BASELINE)
    for relative, content in BUILDS.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for stray in path.parent.glob("kforge-*"):  # what a trick left beside it
            stray.unlink()
        path.unlink(missing_ok=True)
        path.write_bytes(content)


def _baseline_read(root: Path) -> Baseline | None:
    """What a later evaluation would take for the seeded baseline."""
    return BaselineCache(root / "baselines.json").get(BASELINE_KEY, BASELINE.kind)


def _param(case: Case) -> pytest.param:
    marks = (
        [pytest.mark.xfail(strict=True, reason=f"finding: {case.finding}")] if case.finding else []
    )
    return pytest.param(case, id=Path(case.file).stem, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_shared_files_cannot_be_forged(cache, evaluator, case: Case):
    _seed(cache)
    result = evaluator.evaluate(
        CANDIDATES / case.file, resolve_problem(CHAIN, size_set="ci"), get_platform("cpu-triton")
    )
    report = f"{result.status}: {result.message}\nreasons: {result.artifacts.reasons}"
    read = _baseline_read(cache)
    assert read is None or read.timing == BASELINE.timing, f"forged baseline: {read}\n{report}"
    changed = [rel for rel, content in BUILDS.items() if (cache / rel).read_bytes() != content]
    assert not changed, f"the candidate changed {changed}\n{report}"
    if read is not None or case.file in BUILD_TRICKS:  # nothing discarded: the write must fail
        assert result.status is Status.REJECTED, report
        assert REASON in result.artifacts.reasons, report
        assert "writ" in result.message.lower(), report


def test_the_seeded_baseline_is_read_back(cache):
    """The premise: a baseline written as the evaluator writes it is what a later one reads."""
    _seed(cache)
    read = _baseline_read(cache)
    assert read is not None and read.timing == BASELINE.timing
