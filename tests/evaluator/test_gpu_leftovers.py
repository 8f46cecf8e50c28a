"""GPU faults leave no process behind (run with the `gpu` marker on the device): an illegal
memory access, a kernel that never ends (TIMEOUT in seconds under the scaled limits, its
compile timed as a build), and an evaluator killed with SIGKILL while its kernel spins.
Leftovers are looked for by a marker in their environment, anywhere on the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator

import pytest

from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.procs import tree
from tests.conftest import EXAMPLES, ROOT
from tests.procs.leftovers import left
from tests.test_gpu import SPIN

pytestmark = pytest.mark.gpu

CHAIN = "level1/10_elementwise_chain"
MARK = "KFORGE_TEST_GPU_LEFTOVERS"

OOB = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def oob(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * 1000000007))

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        oob[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
"""


@pytest.fixture(scope="module")
def marked() -> Iterator[tuple[Evaluator, str]]:
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    evaluator = Evaluator(EvalConfig(baselines=(), check_unseen=False))  # verify: 120 s
    try:
        yield evaluator, token
    finally:
        evaluator.close()
        del os.environ[MARK]
        assert left(MARK, token, wait_s=5) == []


def _evaluate(evaluator: Evaluator, path) -> object:
    problem = resolve_problem(CHAIN, size_set="ci")
    return evaluator.evaluate(path, problem, get_platform("cuda-triton"))


def test_an_illegal_address_leaves_nothing_and_the_gpu_works_after(marked, tmp_path):
    evaluator, token = marked
    path = tmp_path / "oob.py"
    path.write_text(OOB)
    result = _evaluate(evaluator, path)
    assert result.status is Status.RUNTIME_ERROR, result.message
    assert left(MARK, token, evaluator.helper_pids(), 0, evaluator.zygote_pids()) == []
    assert _evaluate(evaluator, EXAMPLES / "triton/elementwise_chain.py").status is Status.OK


def test_a_spinning_kernel_ends_in_seconds_and_leaves_nothing(marked, tmp_path):
    evaluator, token = marked
    path = tmp_path / "spin.py"
    path.write_text(SPIN)
    result = _evaluate(evaluator, path)
    assert result.status is Status.TIMEOUT and result.stage == "verify", result.message
    assert result.limits.scaled and dict(result.limits.stages)["verify"] < 120, result.limits
    assert dict(result.phases)["verify"] < 60, result.phases  # compile + 5 s, not 120 s
    assert left(MARK, token, evaluator.helper_pids(), 0, evaluator.zygote_pids()) == []
    assert _evaluate(evaluator, EXAMPLES / "triton/elementwise_chain.py").status is Status.OK


KILLED = """
import sys
from kforge_search.evaluator import EvalConfig, Evaluator
from kforge_search.platforms import get_platform
from kforge_search.problem import resolve_problem
from kforge_search.procs import tree

Evaluator(EvalConfig(baselines=(), check_unseen=False, verify_timeout_s=600,
                     limit_factor=0)).evaluate(
    sys.argv[1], resolve_problem("level1/10_elementwise_chain", size_set="ci"),
    get_platform("cuda-triton"))
"""


def _candidate_running(token: str) -> bool:
    """A marked process works in a candidate's folder (the evaluator's kforge-cand-*)."""
    for pid in tree.marked(MARK, token):
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/cwd")).startswith("kforge-cand-"):
                return True
        except OSError:
            continue
    return False


def test_an_evaluator_killed_while_its_kernel_spins_leaves_nothing(tmp_path):
    token = uuid.uuid4().hex
    path = tmp_path / "spin.py"
    path.write_text(SPIN)
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED), str(path)],
        env={**os.environ, MARK: token},
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not _candidate_running(token) and time.monotonic() < deadline:
            assert proc.poll() is None, "the evaluation ended before it was killed"
            time.sleep(0.5)
        time.sleep(15)  # the candidate's compile, then its kernel spins
        assert proc.poll() is None, "the evaluation ended before it was killed"
        assert left(MARK, token), "no marked process to end"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert left(MARK, token, wait_s=30) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
