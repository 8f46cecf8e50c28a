"""KernelBench's files as published (../shared/kernelbench, or $KFORGE_KERNELBENCH) load
unchanged and their references run at the derived ci sizes on the CPU, with finite
outputs and quickly (CPU seconds on one thread); a sample runs at the derived unseen
sizes. Files whose ci inputs stay over the budget (sizes written into the file:
`torch.rand(batch_size, 3, 224, 224)`) are marked slow. Skips when the folder is absent."""

from __future__ import annotations

import ast
import os
import time
from functools import cache
from pathlib import Path

import pytest

from kforge_search.problem import Problem, ProblemError, exec_problem, find_problems, load_problem
from kforge_search.sizes import INPUT_BUDGET, input_elements
from tests.conftest import ROOT

KERNELBENCH = Path(os.environ.get("KFORGE_KERNELBENCH") or ROOT.parent / "shared" / "kernelbench")
FILES = sorted(KERNELBENCH.glob("level*/*.py")) if KERNELBENCH.is_dir() else []
QUICK_S = 1.0  # CPU seconds for a reference at ci sizes (its model built and run once)
HEAVY_S = 10.0  # for one whose sizes the file hard-codes
UNSEEN_SAMPLE = FILES[::7]

pytestmark = pytest.mark.skipif(
    not FILES, reason=f"no KernelBench problems at {KERNELBENCH} (set KFORGE_KERNELBENCH)"
)


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@cache
def _load(path: Path, size_set: str) -> Problem:
    try:
        return load_problem(path, size_set=size_set)
    except ProblemError as exc:
        if "not installed" in str(exc):  # the file is fine; this Python lacks a package
            pytest.skip(str(exc))
        raise


@cache
def _hard_coded(path: Path) -> bool:
    """Whether the file's ci inputs stay over the budget (sizes written into the code)."""
    try:
        problem = load_problem(path, size_set="ci")
    except ProblemError:
        return False
    elements = input_elements(ast.parse(problem.source), dict(problem.overrides))
    return elements is None or elements > INPUT_BUDGET


def _params(files: list[Path]) -> list:
    return [
        pytest.param(f, id=_id(f), marks=[pytest.mark.slow] if _hard_coded(f) else [])
        for f in files
    ]


def _run_reference(problem: Problem) -> tuple[list, float]:
    """The reference's outputs and the CPU seconds it took, on one thread (CPU time, not
    wall time: the box is shared, and one thread's CPU time does not grow with the load)."""
    import torch

    module = exec_problem(problem)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.thread_time()
        with torch.no_grad():
            out = module.Model(*module.get_init_inputs())(*module.get_inputs())
        elapsed = time.thread_time() - start
    finally:
        torch.set_num_threads(threads)
    outputs = list(out) if isinstance(out, tuple | list) else [out]
    return outputs, elapsed


def _check(problem: Problem, limit: float) -> None:
    import torch

    outputs, elapsed = _run_reference(problem)
    assert outputs and all(isinstance(o, torch.Tensor) and o.numel() > 0 for o in outputs)
    for i, out in enumerate(outputs):
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"output {i} of {problem.name} is not finite"
    sizes = dict(problem.overrides)
    assert elapsed < limit, f"{problem.name} at {sizes} took {elapsed:.2f} CPU seconds"


def test_every_file_loads_with_derived_size_sets():
    problems, skipped = find_problems(KERNELBENCH)
    assert all("not installed" in line for line in skipped), skipped
    assert len(problems) + len(skipped) == len(FILES)
    for problem in problems:
        assert {"ci", "unseen"} <= {name for name, _ in problem.size_sets}, problem.name


@pytest.mark.parametrize("path", _params(FILES))
def test_reference_runs_at_ci_sizes(path):
    problem = _load(path, "ci")
    _check(problem, HEAVY_S if _hard_coded(path) else QUICK_S)


@pytest.mark.parametrize("path", _params(UNSEEN_SAMPLE))
def test_reference_runs_at_unseen_sizes(path):
    problem = _load(path, "unseen")
    ci = dict(_load(path, "ci").overrides)
    moved = {k: v for k, v in problem.overrides if ci.get(k) != v}
    assert moved or not ci, f"unseen moves none of {ci}"
    _check(problem, HEAVY_S if _hard_coded(path) else QUICK_S)
