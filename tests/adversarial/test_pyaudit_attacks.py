"""Introspection attacks (candidates/25*.py) end REJECTED with a named reason: by the static
check where the source names its door (imports.py, introspection.py), by the audit hook where
a computed name reaches it at run time (pyaudit.py), by the seal where nothing is audited
(seal.py). Some run a second time with the Python guards off (EvalConfig(python_guards=False)):
the seal behind them must still catch the rewrite.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem

CANDIDATES = Path(__file__).resolve().parent / "candidates"
CHAIN = "level1/10_elementwise_chain"


class Case(NamedTuple):
    file: str
    reasons: frozenset[str]  # one of them must be among the result's
    says: str  # what the message must name
    guards: bool = True  # EvalConfig.python_guards


def _r(*names: str) -> frozenset[str]:
    return frozenset(names)


CASES = [
    Case("25a_frame_seed_inspect.py", _r("static:import", "static:introspection"), "inspect"),
    Case("25b_frame_seed_computed.py", _r("sandbox:introspection"), "tb_frame"),
    Case("25c_gc_job_computed.py", _r("sandbox:gc"), "gc.get_objects"),
    Case("25d_ctypes_peek.py", _r("sandbox:ctypes"), "string_at"),
    Case("25e_clocks_setattr.py", _r("static:introspection"), "object.__setattr__"),
    Case("25e_clocks_setattr.py", _r("dynamic:harness-patched"), "clocks.perf_counter", False),
    Case("25f_recorder_class_patched.py", _r("dynamic:harness-patched"), "OpRecorder.__new__"),
    Case("25f_recorder_class_patched.py", _r("dynamic:harness-patched"), "OpRecorder.__new__",
         False),
    Case("25g_settrace.py", _r("sandbox:introspection"), "sys.settrace"),
    Case("25h_dunder_import.py", _r("static:introspection"), "__import__"),
    Case("25i_builtins_import.py", _r("static:introspection"), "__builtins__"),
    Case("25j_code_swap.py", _r("sandbox:patch"), "same_values"),
    Case("25k_exec_computed.py", _r("sandbox:code"), "compiling code"),
]  # fmt: skip
FILES = frozenset(c.file for c in CASES)


@pytest.fixture(scope="module")
def evaluators():
    made: dict[bool, Evaluator] = {}

    def get(guards: bool) -> Evaluator:
        if guards not in made:
            made[guards] = Evaluator(
                EvalConfig(baselines=(), verify_timeout_s=60, python_guards=guards)
            )
        return made[guards]

    yield get
    for evaluator in made.values():
        evaluator.close()


def _id(case: Case) -> str:
    return Path(case.file).stem + ("" if case.guards else "-guards-off")


@pytest.mark.parametrize("case", [pytest.param(c, id=_id(c)) for c in CASES])
def test_introspection_is_refused(evaluators, case: Case):
    result = evaluators(case.guards).evaluate(
        CANDIDATES / case.file, resolve_problem(CHAIN, size_set="ci"), get_platform("cpu-triton")
    )
    report = f"{result.status}: {result.message}\nreasons: {result.artifacts.reasons}"
    assert result.status is Status.REJECTED, report
    assert set(result.artifacts.reasons) & case.reasons, report
    assert case.says in result.message, report
    if case.reasons <= {"static:import", "static:introspection"}:
        assert result.stage == "static_check", report  # before any process starts
    prose = re.sub(r"\[[a-z]+:[a-z-]+\]", "", result.message)
    assert len(prose) > 40, report  # the message explains, not only the code
