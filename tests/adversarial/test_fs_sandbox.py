"""Writes outside the candidate's folders change nothing (evaluator/landlock.py, guards.py).

Each 18*.py candidate attacks /tmp/kforge_fs_sandbox_target, a folder outside the candidate's
writable ones that this test makes afresh for each case: a hard link, truncate, chmod, a
symlink and a rename onto the victim from Python (the audit hook names them: REJECTED); files
made there by the two `os` calls that raise no audit event (mknod, mkfifo), and every attack
from C++, which no hook sees: Landlock refuses each call, the candidate ignores the refusals
and computes honestly (OK), and its printed report says what was refused. Whatever the
status, nothing in the folder may change. On a machine without Landlock every case ends
INFRA_ERROR instead (the sandbox fails closed), and still nothing changes. The C++ case builds
an extension of its own (~30 s): slow.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from pathlib import Path
from typing import NamedTuple

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status, landlock
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

CANDIDATES = Path(__file__).resolve().parent / "candidates"
CHAIN = "level1/10_elementwise_chain"
TARGET = Path("/tmp/kforge_fs_sandbox_target")  # the candidates' own constant
VICTIM = TARGET / "victim.txt"
ORIGINAL = "the victim's original contents\n"
MODE = 0o640
# what Landlock answers each attack of 18f/18g (a hard link across the sandbox's boundary is
# EXDEV: the kernel's answer to a link or rename that would widen access)
NATIVE_REFUSALS = {
    "write": errno.EACCES,
    "truncate": errno.EACCES,
    "hardlink": errno.EXDEV,
    "symlink": errno.EACCES,
    "rename": errno.EACCES,
    "create": errno.EACCES,
    "unlink": errno.EACCES,
    "mkdir": errno.EACCES,
}
LANDLOCK = landlock.probe()[0] >= landlock.MIN_ABI and os.environ.get(landlock.OPT_OUT_ENV) != "1"


class Case(NamedTuple):
    file: str
    platform: str
    status: Status  # where Landlock is available
    refusals: dict[str, int] | None = None  # OK: each attack its report must say was refused


CASES = [
    Case("18a_hardlink_outside.py", "cpu-triton", Status.REJECTED),
    Case("18b_truncate_outside.py", "cpu-triton", Status.REJECTED),
    Case("18c_chmod_outside.py", "cpu-triton", Status.REJECTED),
    Case("18d_symlink_outside.py", "cpu-triton", Status.REJECTED),
    Case("18e_rename_onto_outside.py", "cpu-triton", Status.REJECTED),
    Case("18f_unaudited_outside.py", "cpu-triton", Status.OK,
         {"mknod": errno.EACCES, "mkfifo": errno.EACCES}),
    Case("18g_native_outside.py", "cpu-cpp", Status.OK, NATIVE_REFUSALS),
]  # fmt: skip
FILES = frozenset(c.file for c in CASES)


def _param(case: Case) -> pytest.param:
    marks = [pytest.mark.slow] if case.platform == "cpu-cpp" else []
    return pytest.param(case, id=Path(case.file).stem, marks=marks)


@pytest.fixture(scope="module")
def evaluator():
    made = Evaluator(EvalConfig(baselines=(), verify_timeout_s=60))
    yield made
    made.close()


@pytest.fixture
def target():
    """The folder the candidates attack, made afresh; its state before the evaluation."""
    shutil.rmtree(TARGET, ignore_errors=True)
    TARGET.mkdir(parents=True)
    VICTIM.write_text(ORIGINAL)
    VICTIM.chmod(MODE)
    before = _state()
    assert before == (["victim.txt"], ORIGINAL, MODE, 1)
    yield before
    shutil.rmtree(TARGET, ignore_errors=True)


def _state() -> tuple[list[str], str, int, int]:
    """What an attack could change: the folder's entries, and the victim's contents, mode
    and number of hard links."""
    entries = sorted(os.listdir(TARGET)) if TARGET.is_dir() else []
    if not VICTIM.is_file():
        return entries, "", 0, 0
    info = VICTIM.stat()
    return entries, VICTIM.read_text(), stat.S_IMODE(info.st_mode), info.st_nlink


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_writes_outside_change_nothing(evaluator, target, case: Case):
    result = evaluator.evaluate(
        CANDIDATES / case.file, resolve_problem(CHAIN, size_set="ci"), get_platform(case.platform)
    )
    report = f"{result.status}: {result.message}\nreasons: {result.artifacts.reasons}"
    assert _state() == target, f"the attack changed {TARGET}\n{report}"
    if not LANDLOCK:  # fails closed, saying what is missing and how to opt out
        assert result.status is Status.INFRA_ERROR, report
        assert "Landlock" in result.message and landlock.OPT_OUT_ENV in result.message
        return
    assert result.status is case.status, f"{report}\n{result.artifacts.output_tail}"
    if case.status is Status.REJECTED:
        assert "sandbox:write-outside" in result.artifacts.reasons, report
        assert "writ" in result.message.lower(), report
        assert str(TARGET) in result.message or "victim_link" in result.message, report
    else:
        assert case.refusals is not None
        said = dict(re.findall(r"fs-attack (\w+): (.*)", result.artifacts.output_tail))
        wanted = {name: f"refused (errno {code})" for name, code in case.refusals.items()}
        assert said == wanted, result.artifacts.output_tail
