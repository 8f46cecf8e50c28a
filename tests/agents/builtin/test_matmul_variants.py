"""Matmul variants (issue 22, item 2): a transposed left operand, einsum contractions that are
GEMMs, triu / tril of a GEMM output, matrix-vector and tall-skinny shapes. Each small
problem (odd sizes, inputs that are not triangular) is synthesized for cpu-triton (under
Triton's interpreter) and cpu-cpp and verified against its reference in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.patterns import make

AGENT = BuiltinAgent()


def _two(name: str, forward: str, a: str, b: str):
    return make(name, forward, init="pass", params="", args="A, B", init_inputs="[]",
                inputs=f"[{a}, {b}]")  # fmt: skip


PROBLEMS = {
    "at_b": _two("at_b", "return torch.matmul(A.T, B)",
                 "torch.rand(29, 37)", "torch.randn(29, 53)"),
    "at_bt": _two("at_bt", "return torch.matmul(A.T, B.T)",
                  "torch.randn(29, 37)", "torch.rand(53, 29)"),
    "at_b_relu": _two("at_b_relu", "return torch.relu(A.t() @ B) * 0.5",
                      "torch.randn(29, 37)", "torch.randn(29, 53)"),
    "bmm_at": _two("bmm_at", "return torch.bmm(A.transpose(1, 2), B)",
                   "torch.randn(3, 29, 37)", "torch.randn(3, 29, 21)"),
    "at3_w": _two("at3_w", "return torch.matmul(A.transpose(-1, -2), B) + 2.0",
                  "torch.randn(3, 29, 19)", "torch.randn(29, 23)"),
    "einsum_4d": _two("einsum_4d", 'return torch.einsum("bijl,lk->bijk", A, B)',
                      "torch.rand(2, 3, 7, 29)", "torch.rand(29, 37)"),
    "einsum_3d": _two("einsum_3d", 'return torch.einsum("bij,jk->bik", A, B)',
                      "torch.randn(3, 11, 29)", "torch.randn(29, 37)"),
    "einsum_2d": _two("einsum_2d", 'return torch.einsum("ij,jk->ik", A, B) - 1.0',
                      "torch.randn(37, 29)", "torch.randn(29, 53)"),
    "einsum_bmm": _two("einsum_bmm", 'return torch.einsum("bij,bjk->bik", A, B)',
                       "torch.randn(3, 13, 29)", "torch.randn(3, 29, 37)"),
    "einsum_bt": _two("einsum_bt", 'return torch.einsum("ik,jk->ij", [A, B])',
                      "torch.randn(37, 29)", "torch.randn(53, 29)"),
    "einsum_at": _two("einsum_at", 'return torch.einsum("ki , kj", A, B)',
                      "torch.randn(29, 37)", "torch.randn(29, 53)"),
    "triu": _two("triu", "return torch.triu(torch.matmul(A, B))",
                 "torch.rand(37, 29)", "torch.rand(29, 53)"),
    "tril": _two("tril", "return torch.tril(torch.matmul(A, B))",
                 "torch.randn(53, 29)", "torch.randn(29, 37)"),
    "triu_diag": _two("triu_diag", "return torch.triu(A @ B, diagonal=3).relu()",
                      "torch.randn(37, 29)", "torch.randn(29, 53)"),
    "tril_neg_diag": _two("tril_neg_diag", "return torch.tril(A @ B, -2) + 1.0",
                          "torch.randn(37, 29)", "torch.randn(29, 37)"),
    "triu_softmax": _two("triu_softmax", "return torch.softmax(torch.triu(A @ B, 1), dim=-1)",
                         "torch.randn(37, 29)", "torch.randn(29, 37)"),
    "bmm_tril": _two("bmm_tril", "return torch.tril(torch.bmm(A, B), 1)",
                     "torch.randn(3, 19, 29)", "torch.randn(3, 29, 23)"),
    "tril_3d": _two("tril_3d", "return torch.tril(torch.matmul(A, B))",
                    "torch.randn(3, 19, 29)", "torch.randn(29, 23)"),
    "triu_tt": _two("triu_tt", "return torch.triu(torch.matmul(A, B))",
                    "torch.triu(torch.rand(37, 37))", "torch.triu(torch.rand(37, 37))"),
    "triu_of_input": _two("triu_of_input", "return torch.triu(A, 1) @ B",
                          "torch.randn(37, 41)", "torch.randn(41, 23)"),
    "matvec": _two("matvec", "return torch.matmul(A, B)",
                   "torch.rand(37, 531)", "torch.rand(531, 1)"),
    "tall_skinny": _two("tall_skinny", "return torch.matmul(A, B)",
                        "torch.rand(301, 5)", "torch.rand(5, 301)"),
    "small_k": _two("small_k", "return torch.matmul(A, B)",
                    "torch.rand(67, 3)", "torch.rand(3, 45)"),
    "skinny_out": _two("skinny_out", "return torch.matmul(A, B)",
                       "torch.rand(301, 257)", "torch.rand(257, 3)"),
}  # fmt: skip

REFUSED = {
    "einsum_outer": (_two("einsum_outer", 'return torch.einsum("i,j->ij", A, B)',
                          "torch.randn(7)", "torch.randn(5)"), "einsum"),
    "einsum_two_sums": (_two("einsum_two_sums", 'return torch.einsum("ijk,jk->i", A, B)',
                             "torch.randn(3, 4, 5)", "torch.randn(4, 5)"), "einsum"),
    "einsum_permuted": (_two("einsum_permuted", 'return torch.einsum("ij,jk->ki", A, B)',
                             "torch.randn(3, 4)", "torch.randn(4, 5)"), "einsum"),
    "einsum_ellipsis": (_two("einsum_ellipsis", 'return torch.einsum("...j,jk->...k", A, B)',
                             "torch.randn(3, 4)", "torch.randn(4, 5)"), "einsum"),
    "triu_of_right": (_two("triu_of_right", "return A @ torch.triu(B)",
                           "torch.randn(4, 4)", "torch.randn(4, 5)"), "matmul"),
}  # fmt: skip

TRITON = {
    "seed": TritonGenome(),
    "apart": TritonGenome(placement="second_pass", split_k=2, block_m=16, block_n=32, block_k=16,
                          pass_block=64, weight_layout="kn"),
}  # fmt: skip


def _source(problem, platform: str, genome) -> str:
    draft = AGENT.synthesize(problem, get_platform(platform), genome, "test")
    assert not hasattr(draft, "message"), draft
    return draft.source


@pytest.mark.parametrize("genome", sorted(TRITON))
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_triton_verifies(verify, name, genome):
    result = verify(_source(PROBLEMS[name], "cpu-triton", TRITON[genome]), PROBLEMS[name])
    assert result.ok, result.message


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_cpp_verifies(verify, name):
    result = verify(_source(PROBLEMS[name], "cpu-cpp", CppGenome()), PROBLEMS[name])
    assert result.ok, result.message


def test_cpp_small_tiles_and_threads(verify):
    genome = CppGenome(block_m=8, block_n=16, block_k=16, parallel_work=1)
    for name in ("at_bt", "bmm_at", "triu_diag", "bmm_tril", "triu_softmax", "einsum_4d"):
        result = verify(_source(PROBLEMS[name], "cpu-cpp", genome), PROBLEMS[name])
        assert result.ok, f"{name}: {result.message}"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_a_reason(name):
    problem, op = REFUSED[name]
    result = analyze(problem)
    assert isinstance(result, Unsupported), result
    assert result.op.startswith(op), result.message


def test_the_mask_is_not_an_assumption(tmp_path: Path):
    """A kernel that skipped the masked part only where the inputs are triangular would
    differ on full inputs: the triu problem's inputs are full (torch.rand), checked here."""
    import torch

    from kforge_search.problem import exec_problem

    module = exec_problem(PROBLEMS["triu"])
    a, b = module.get_inputs()
    assert not torch.equal(torch.triu(a @ b), a @ b)


KERNELBENCH = Path(__file__).resolve().parents[3].parent / "shared" / "kernelbench" / "level1"
LEVEL1 = ("4_", "7_", "9_", "11_", "14_", "15_", "16_", "18_")


def _level1(prefix: str):
    found = sorted(KERNELBENCH.glob(f"{prefix}*.py"))
    assert len(found) == 1, found
    return load_problem(found[0])


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench level1 is not here")
@pytest.mark.parametrize("prefix", LEVEL1)
def test_kernelbench_level1_converts(prefix):
    result = analyze(_level1(prefix))
    assert not isinstance(result, Unsupported), result.message


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench level1 is not here")
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
@pytest.mark.parametrize("prefix", LEVEL1)
def test_kernelbench_level1_verifies_at_odd_sizes(verify, prefix, platform):
    problem = _level1(prefix).resized("unseen")
    genome = TRITON["seed"] if platform == "cpu-triton" else CppGenome()
    result = verify(_source(problem, platform, genome), problem)
    assert result.ok, result.message


@pytest.mark.parametrize("name", ["at_bt", "bmm_tril", "triu_softmax", "einsum_4d"])
def test_kernels_compile_for_sm90(tmp_path, name):
    """The index expressions (a float period cast to int, rows and cols of each dialect) and
    the strided A compile for an H100, where the interpreter's loose typing does not apply."""
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    for genome in TRITON.values():
        report = compile_for_h100(PROBLEMS[name], "strict", tmp_path, genome)
        assert "_kf_s0_" in report and "wgmma" in report, report
        assert "fail" not in report.lower(), report


@pytest.mark.parametrize("precision", ["tf32", "tf32rn", "tf32x3", "bf16x3", "ieee"])
def test_tf32_dots_get_k_major_operands(precision):
    """Hopper's wgmma takes tf32 operands K-major only: on the H200 the same tf32 kernel ran
    at 16% of the roofline with B stored [K, N] and 83% with B stored [N, K]. tf32 precisions
    get K-major copies (an input's per call, a parameter's once); others read as stored."""
    genome = TritonGenome(precision=precision)
    k_major = precision.startswith("tf32")
    rn = precision == "tf32rn"  # the copies rounded to nearest tf32 (_kf_tf32rn) as made
    inputs = _source(PROBLEMS["einsum_2d"], "cpu-triton", genome)  # A @ B, B stored [K, N]
    b_copy = (
        "w0 = _kf_tf32rn(B.transpose(-1, -2))" if rn else "w0 = B.transpose(-1, -2).contiguous()"
    )
    assert (b_copy in inputs) == k_major, inputs
    transposed_a = _source(PROBLEMS["at_b"], "cpu-triton", genome)  # A.T @ B
    assert (("a0 = _kf_tf32rn(a0)" if rn else "a0 = a0.contiguous()") in transposed_a) == k_major
    weight = make("x_w", "return x @ self.w", init="self.w = nn.Parameter(torch.randn(29, 53))",
                  params="", args="x", init_inputs="[]",
                  inputs="[torch.randn(37, 29)]")  # fmt: skip
    source = _source(weight, "cpu-triton", genome)
    made = "lambda w: _kf_tf32rn(w.t().contiguous())" if rn else "lambda w: w.t().contiguous()"
    assert (made in source) == k_major, source


def test_rows_not_16_byte_aligned_still_go_through_tma(tmp_path: Path, verify):
    """A K of 45 (180-byte rows, as 8_Matmul_with_irregular_shapes' 2949): the TMA unit
    needs rows 16-byte aligned, so the operands are read from an aligned copy of the same
    shape (_kf_aligned), not by the masked pointer loads that ran 18 ms on the H200."""
    from tests.agents.builtin.harness import load_candidate

    problem = _two("irregular", "return torch.matmul(A, B)",
                   "torch.randn(37, 45)", "torch.rand(45, 23)")  # fmt: skip
    genome = TritonGenome(precision="ieee", loads="tma", block_m=16, block_n=16, block_k=16)
    source = _source(problem, "cpu-triton", genome)
    result = verify(source, problem)
    assert result.ok, result.message
    module = __import__("sys").modules[load_candidate(source, tmp_path / "c.py").__module__]
    a, b = torch.randn(37, 45), torch.randn(23, 45)  # B K-major, as the weight copy is
    da, db = module._kf_descs(a, b, 16, 16, 16, False)
    assert da is not None and db is not None, "no TMA for rows of 180 bytes"
    for desc, t in ((da, a), (db, b)):
        assert list(desc.shape) == list(t.shape) and desc.strides[0] % 4 == 0
        assert torch.equal(desc.base[:, :45], t)
