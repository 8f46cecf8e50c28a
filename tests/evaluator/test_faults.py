"""Faults in a candidate never take the evaluator down: each gets its status and a message,
the evaluator keeps working after many in a row, and no process is left behind."""

from __future__ import annotations

import time

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.guards import child_processes
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from tests.conftest import EXAMPLES

CHAIN = "level1/10_elementwise_chain"

# A valid Triton candidate for the chain problem; {before} runs at import, {inside} in forward.
TEMPLATE = """
import os, sys, ctypes, time
import torch
import torch.nn as nn
import triton
import triton.language as tl

{before}

@triton.jit
def chain(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x * 1.5 + 0.25, 0.0) * 2.0 - 0.1, mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        chain[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        {inside}
        return out
"""

FAULTS = {
    "segfault": ("", "ctypes.string_at(0)", Status.RUNTIME_ERROR, "SIGSEGV"),
    "os_exit_at_import": ("os._exit(3)", "", Status.RUNTIME_ERROR, "exited with code 3"),
    "sys_exit_at_import": ("sys.exit(4)", "", Status.COMPILE_ERROR, "sys.exit(4)"),
    "exception_at_import": ("raise ValueError('nope')", "", Status.COMPILE_ERROR, "nope"),
    "oversized_allocation": (
        "",
        "torch.empty(2**45, dtype=torch.uint8)",
        Status.RUNTIME_ERROR,
        "forward raised",
    ),
    "host_infinite_loop": ("", "while True: pass", Status.TIMEOUT, "time limit of the verify"),
    "huge_output": (
        "",
        "sys.stdout.write('x' * (100 * 2**20)); sys.stdout.flush()",
        Status.RUNTIME_ERROR,
        "output limit",
    ),
    "memory_hog": (
        "",
        "blob = bytearray(6 * 2**30)",
        Status.RUNTIME_ERROR,
        "memory",
    ),
    "exit_in_forward": ("", "os._exit(0)", Status.RUNTIME_ERROR, "exited with code 0"),
}

HANGING_COMPILE = """
import os
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fifo = os.path.abspath("never_written.h")
os.mkfifo(fifo)
ext = load_inline(name="kforge_hang", cpp_sources=f'#include "{fifo}"\\nint f() {{ return 1; }}',
                  functions=["f"])

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
"""


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(
        EvalConfig(
            baselines=(),
            check_unseen=False,
            verify_timeout_s=8,
            build_timeout_s=20,
            memory_limit_mb=2048,
            python_guards=False,  # faults through ctypes and sys, which they would refuse
        )
    )


def _children() -> set[int]:
    return set(child_processes())


def _write(tmp_path, name, before, inside):
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(before=before, inside=inside))
    return path


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_gets_its_status_and_a_message(evaluator, tmp_path, name):
    before, inside, status, says = FAULTS[name]
    problem = resolve_problem(CHAIN, size_set="ci")
    result = evaluator.evaluate(
        _write(tmp_path, name, before, inside), problem, get_platform("cpu-triton")
    )
    assert result.status is status, result.message
    assert says in result.message + result.artifacts.traceback


def test_a_compile_that_hangs_is_killed(evaluator, tmp_path):
    path = tmp_path / "hang.py"
    path.write_text(HANGING_COMPILE)
    started = time.monotonic()
    result = evaluator.evaluate(
        path, resolve_problem(CHAIN, size_set="ci"), get_platform("cpu-cpp")
    )
    assert result.status is Status.TIMEOUT and result.stage == "build", result.message
    assert time.monotonic() - started < 20 + 60


def test_twenty_faults_in_a_row_then_an_honest_candidate_is_ok(evaluator, tmp_path):
    before_children = _children()
    problem = resolve_problem(CHAIN, size_set="ci")
    quick = [n for n in sorted(FAULTS) if FAULTS[n][2] is not Status.TIMEOUT]
    names = [quick[i % len(quick)] for i in range(20)]
    for i, name in enumerate(names):
        before, inside, status, _ = FAULTS[name]
        result = evaluator.evaluate(
            _write(tmp_path, f"{name}_{i}", before, inside), problem, get_platform("cpu-triton")
        )
        assert result.status is status, (name, result.message)
    honest = evaluator.evaluate(
        EXAMPLES / "triton/elementwise_chain.py", problem, get_platform("cpu-triton")
    )
    assert honest.status is Status.OK, honest.message
    spare = {*evaluator.helper_pids(), *evaluator.zygote_pids()}  # its own, no candidate's
    assert _children() - spare <= before_children, "child processes were left behind"


def test_an_exception_that_escaped_the_harness_is_named_not_called_an_exit():
    """A child that ended with code 1 after a traceback (torch.OutOfMemoryError while its
    outputs were saved, on a crowded H200) raised: its result names the exception, not
    "do not exit the process"."""
    from kforge_search.evaluator.outcome import exit_result, last_exception
    from kforge_search.evaluator.result import EvalResult
    from kforge_search.evaluator.sandbox import ChildExit

    output = (
        'seen 1\nTraceback (most recent call last):\n  File "w.py", line 3, in save\n'
        "    torch.save(x, p)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8 GiB\n"
    )
    assert last_exception(output).startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert last_exception("no traceback here\n") == ""
    base = EvalResult(Status.OK, "", "", "id", "name", "cuda-triton", "strict", "h")
    exit = ChildExit(1, "", "", "verify", output, len(output))
    result = exit_result(base, exit, None)
    assert result.status is Status.RUNTIME_ERROR
    assert "It raised torch.OutOfMemoryError" in result.message, result.message
    assert "Do not exit" not in result.message
    plain = exit_result(base, ChildExit(1, "", "", "verify", "bye\n", 4), None)
    assert "Do not exit the process" in plain.message
