"""More library compute from native code (issue 20), beside test_native_library.py's.

candidates/27*.py share one C++ source (one build): each computes the GEMM with somebody
else's code, a way 17* does not try (at::native::matmul, float64 BLAS, an operator's
redispatch entry point, a Tensor method under a dispatch-key guard, at::cpu::addmm, Python
source run from C++). The extension's imports give each away: REJECTED
"native:denied-symbol", the message naming the symbol.

candidates/28*.py share a second source whose imports are all on the allowlist: torch.mm
called back through pybind11 under a guard, and sgemm_ found by reading libtorch's ELF file.
docs/evaluator.md lists both as not defended; they pass today (findings: xfail, strict). Their
build is a second one, so they are `slow`.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

CANDIDATES = Path(__file__).resolve().parent / "candidates"
GEMM = "level2/01_gemm_bias_relu"
REASON = "native:denied-symbol"


class Case(NamedTuple):
    file: str
    named: tuple[str, ...]  # symbols the message must name
    reasons: frozenset[str] = frozenset({REASON})
    finding: str = ""  # why the trick gets through today (the test is then xfail, strict)


CASES = [
    Case("27a_aten_native_matmul.py", ("at::native::matmul",)),
    Case("27b_float64_dgemm.py", ("dgemm_",)),
    Case("27c_ops_redispatch.py", ("at::_ops::mm::redispatch",)),
    Case("27d_tensor_method_guarded.py", ("at::_ops::mm::call",)),
    Case("27e_aten_cpu_addmm.py", ("at::cpu::addmm",)),
    Case("27f_python_source_from_cpp.py", ("PyRun_StringFlags",)),
]
EVASIONS = [
    Case("28a_python_callback_guarded.py", (), frozenset({REASON, "dynamic:torch-fallback"}),
         "torch.mm called through pybind11 under an ExcludeDispatchKeyGuard: every import is "
         "allowed and the recorder is switched off"),
    Case("28b_elf_resolved_sgemm.py", (), frozenset({REASON, "dynamic:torch-fallback"}),
         "sgemm_ found from /proc/self/maps and libtorch's .dynsym read with fopen/fread: no "
         "denied import"),
]  # fmt: skip
FILES = frozenset(c.file for c in CASES + EVASIONS)


@pytest.fixture(scope="module")
def evaluator():
    made = Evaluator(EvalConfig(baselines=(), verify_timeout_s=60))
    yield made
    made.close()


def _param(case: Case, *marks: pytest.MarkDecorator) -> pytest.param:
    if case.finding:
        marks += (pytest.mark.xfail(strict=True, reason=f"finding: {case.finding}"),)
    return pytest.param(case, id=Path(case.file).stem, marks=marks)


@pytest.mark.parametrize(
    "case", [_param(c) for c in CASES] + [_param(c, pytest.mark.slow) for c in EVASIONS]
)
def test_library_compute_is_refused(evaluator, case: Case):
    result = evaluator.evaluate(
        CANDIDATES / case.file, resolve_problem(GEMM, size_set="ci"), get_platform("cpu-cpp")
    )
    timing = f"p50 {result.timing.p50_ms:.4f} ms" if result.timing else "not timed"
    report = f"{result.status}: {result.message}\nreasons: {result.artifacts.reasons}; {timing}"
    assert result.status is Status.REJECTED, report
    assert set(result.artifacts.reasons) & case.reasons, report
    for symbol in case.named:
        assert f"{symbol} (" in result.message, f"{symbol} is not named\n{report}"


def _build(path: Path) -> tuple[str, str]:
    """The C++ source and the load_inline call (as source text) of a cpu-cpp candidate."""
    tree = ast.parse(path.read_text())
    source = next(
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "_CPP_SOURCE" for t in n.targets)
        and isinstance(n.value, ast.Constant)
    )
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("load_inline")
    )
    return source, ast.unparse(call)


def test_each_group_shares_one_build_and_every_file_is_a_case():
    """27* embed one source, name and flags (one build for the default run), 28* another;
    every 27*/28* file here is a case."""
    assert {p.name for p in CANDIDATES.glob("2[78]*.py")} == FILES
    for group in (CASES, EVASIONS):
        builds = {_build(CANDIDATES / c.file) for c in group}
        assert len(builds) == 1, [c.file for c in group]
    assert _build(CANDIDATES / CASES[0].file) != _build(CANDIDATES / EVASIONS[0].file)
