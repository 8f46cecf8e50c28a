"""Generated Triton kernels compile for an H100 (sm_90) without a GPU, and their GEMMs use
Hopper's tensor cores (wgmma): what the interpreter cannot check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_search.agents import BuiltinAgent, Context
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems, resolve_problem
from tests.conftest import PROBLEMS, ROOT

LEVEL2, _ = find_problems(PROBLEMS / "level2")


def compile_for_h100(problem, policy: str, tmp_path: Path) -> str:
    (draft,) = BuiltinAgent().propose(Context(problem, get_platform("cuda-triton"), policy))
    path = tmp_path / "candidate.py"
    path.write_text(draft.source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    out = subprocess.run(
        [sys.executable, "-m", "tests.agents.aot", str(path), "--arch", "90"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize(
    ("name", "policy"),
    [("level2/01_gemm_bias_relu", "strict"), ("level2/16_gemm_layernorm_relu", "loose")],
)
def test_kernels_compile_for_sm90_with_wgmma(tmp_path, name, policy):
    report = compile_for_h100(resolve_problem(name), policy, tmp_path)
    assert "_kf_s0_gemm: ok (wgmma" in report


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["strict", "loose"])
@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_every_level2_candidate_compiles_for_sm90(tmp_path, problem, policy):
    report = compile_for_h100(problem, policy, tmp_path)
    assert "wgmma" in report
