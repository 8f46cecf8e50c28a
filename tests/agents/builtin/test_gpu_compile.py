"""Generated Triton kernels compile for an H100 (sm_90) without a GPU, and their GEMMs use
Hopper's tensor cores (wgmma): what the interpreter cannot check."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_search.agents.base import Context
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems, resolve_problem
from tests.conftest import PROBLEMS, ROOT

LEVEL2, _ = find_problems(PROBLEMS / "level2")


def compile_for_h100(
    problem, policy: str, tmp_path: Path, genome=None, dtype: str = "", sets: tuple[str, ...] = ()
) -> str:
    """Each kernel of the problem's draft compiled for sm90 (tests/agents/builtin/aot.py);
    `sets`: NAME=VALUE constexprs in place of aot.CONSTEXPRS' (e.g. ONE=True)."""
    agent, platform = BuiltinAgent(), get_platform("cuda-triton")
    if genome is None:
        (draft,) = agent.propose(Context(problem, platform, policy))
    else:
        draft = agent.synthesize(problem, platform, genome, "aot")
    path = tmp_path / "candidate.py"
    path.write_text(draft.source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    out = subprocess.run(
        [sys.executable, "-m", "tests.agents.builtin.aot", str(path), "--arch", "90",
         *(["--dtype", dtype] if dtype else []), *(a for v in sets for a in ("--set", v))],
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


@pytest.mark.parametrize("loads", ["tma", "pointer"])
@pytest.mark.parametrize("genes", [{"x3": "presplit", "block_k": 32}, {"precision": "bf16x3"}])
def test_three_dot_schemes_compile_for_sm90_with_wgmma(tmp_path, genes, loads):
    """The presplit tf32x3 and bf16x3 K loops (nested, promoted) and the weight-split
    kernel compile for Hopper, with the GEMM on wgmma, in the shared memory it has."""
    from kforge_search.agents.builtin import TritonGenome

    genome = TritonGenome(block_m=128, block_n=128, block_k=genes.get("block_k", 64),
                          precision=genes.get("precision", "tf32x3"), x3=genes.get("x3", "triton"),
                          loads=loads, num_stages=3)  # fmt: skip
    report = compile_for_h100(resolve_problem("level2/02_gemm_gelu_scale"), "strict", tmp_path,
                              genome)  # fmt: skip
    assert "_kf_split: ok" in report and "_kf_s0_gemm: ok (wgmma" in report, report
    shared = [int(m) for m in re.findall(r"(\d+) bytes of shared memory", report)]
    assert max(shared) <= 227 * 1024, report


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["strict", "loose"])
@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_every_level2_candidate_compiles_for_sm90(tmp_path, problem, policy):
    report = compile_for_h100(problem, policy, tmp_path)
    assert "wgmma" in report


@pytest.mark.parametrize(
    ("forward", "inputs"),
    [  # a triplet loss's two distances in one walk (triton_kernels.one_walk); A @ b with
        # one output column as a row pass (handlers._matvec)
        ("return torch.nn.functional.triplet_margin_loss(x, y, z, margin=0.5)",
         "[torch.randn(19, 157), torch.randn(19, 157), torch.randn(19, 157)]"),
        ("return torch.matmul(x, y)", "[torch.rand(37, 1031), torch.rand(1031, 1)]"),
    ],
)  # fmt: skip
def test_row_passes_compile_for_sm90(tmp_path, forward, inputs):
    from kforge_search.agents.builtin import TritonGenome
    from kforge_search.problem import load_problem
    from tests.agents.builtin.test_families_gpu import problem_source

    path = tmp_path / "p.py"
    path.write_text(problem_source(forward, inputs))
    genome = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=0)
    report = compile_for_h100(load_problem(path), "strict", tmp_path, genome)
    assert "_kf_s0_rows: ok" in report, report
