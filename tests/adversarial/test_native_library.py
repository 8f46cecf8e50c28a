"""Library compute from native code is refused at the binary (evaluator/native_audit.py).

Each candidate (17*.py in candidates/) computes its GEMM with somebody else's code: ATen's
kernels, an ATen operator's C++ entry point, BLAS linked or found with dlsym, an operator
under a dispatch-key guard, cuBLAS. Most of them pass the op recorder unseen (they compute
the right values); the built extension's imports give them away, and the message names the
symbols. The default run builds one extension that does all five CPU tricks at once; each
trick on its own (a build each, ~30 s here) is `slow`, cuBLAS is `gpu`.
"""

from __future__ import annotations

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
    platform: str
    named: tuple[str, ...]  # symbols the message must name
    marks: tuple[pytest.MarkDecorator, ...] = ()


CASES = [
    Case("17_library_compute.py", "cpu-cpp",
         ("at::cpu::mm", "at::_ops::addmm::call", "sgemm_", "dlopen", "dlsym",
          "at::_ops::matmul::call")),
    Case("17a_aten_cpu_kernel.py", "cpu-cpp", ("at::cpu::mm",), (pytest.mark.slow,)),
    Case("17b_aten_ops_call.py", "cpu-cpp", ("at::_ops::addmm::call",), (pytest.mark.slow,)),
    Case("17c_extern_sgemm.py", "cpu-cpp", ("sgemm_",), (pytest.mark.slow,)),
    Case("17d_dlsym_blas.py", "cpu-cpp", ("dlopen", "dlsym"), (pytest.mark.slow,)),
    Case("17e_dispatch_key_guard.py", "cpu-cpp", ("at::_ops::matmul::call",),
         (pytest.mark.slow,)),
    Case("17f_cublas_gemm.py", "cuda-cpp",
         ("cublasSgemm_v2", "at::cuda::getCurrentCUDABlasHandle"), (pytest.mark.gpu,)),
]  # fmt: skip
FILES = frozenset(c.file for c in CASES)


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=(), verify_timeout_s=60))


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=Path(c.file).stem, marks=c.marks) for c in CASES]
)
def test_library_compute_is_refused_naming_the_symbols(evaluator, case: Case):
    result = evaluator.evaluate(
        CANDIDATES / case.file,
        resolve_problem(GEMM, size_set="ci"),
        get_platform(case.platform),
    )
    report = f"{result.status}: {result.message}\nreasons: {result.artifacts.reasons}"
    assert result.status is Status.REJECTED, report
    assert REASON in result.artifacts.reasons, report
    for symbol in case.named:
        assert f"{symbol} (" in result.message, f"{symbol} is not named\n{report}"
    assert "write the computation yourself" in result.message, report


def test_every_trick_has_its_own_candidate_and_the_default_one_has_them_all():
    """The combined candidate names every CPU trick's symbol, so the default run covers each
    rule; and every 17* file here is a case."""
    assert {p.name for p in CANDIDATES.glob("17*.py")} == FILES
    combined = set(CASES[0].named)
    singles = {s for c in CASES[1:] if c.platform == "cpu-cpp" for s in c.named}
    assert singles == combined
