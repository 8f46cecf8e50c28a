"""A row pass in parts (triton_kernels.split_pass_kernels): where a pass has fewer (row,
segment) programs than the genome's `pass_programs` and long rows, each statistic gets a
kernel whose programs walk one part of a row each, and a last kernel makes the outputs. On
the H200, KernelBench's 40_LayerNorm (16 rows of 4M elements: 16 programs) ran at 1% of the
roofline. Here small rows cut into parts (pass_block 64) verify on Triton's interpreter,
from both torch.rand and torch.randn, at odd sizes; a scan is never split."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.platforms import get_platform
from tests.agents.builtin.patterns import make

AGENT = BuiltinAgent()
SPLIT = TritonGenome(pass_block=64, pass_programs=1024)


def _one(name: str, forward: str, inputs: str, init: str = "pass"):
    return make(name, forward, init=init, params="", args="x", init_inputs="[]", inputs=inputs)


PROBLEMS = {
    "layernorm": _one("layernorm", "return self.ln(x)", "[torch.randn(2, 5, 7, 31)]",
                      init="self.ln = nn.LayerNorm((5, 7, 31))"),
    "groupnorm": _one("groupnorm", "return self.gn(x)", "[torch.rand(2, 8, 9, 29)]",
                      init="self.gn = nn.GroupNorm(4, 8)"),
    "softmax": _one("softmax", "return torch.softmax(x, dim=-1)", "[torch.randn(3, 1501)]"),
    "l1norm": _one("l1norm", "return x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
                   "[torch.rand(3, 1501)]"),
    "rowmax": _one("rowmax", "return torch.max(x, dim=1).values", "[torch.randn(3, 1501)]"),
    "rownorm": _one("rownorm", "return x / torch.norm(x, p=2, dim=1, keepdim=True)",
                    "[torch.rand(5, 1337)]"),
}  # fmt: skip


def _source(problem, genome: TritonGenome) -> str:
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    return draft.source


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_row_pass_in_parts_verifies(verify, name):
    source = _source(PROBLEMS[name], SPLIT)
    assert "_part0[(R, " in source and "_final[(R, " in source  # launched in parts here
    result = verify(source, PROBLEMS[name])
    assert result.ok, result.message
    assert result.launches >= 2


def test_a_pass_is_one_kernel_without_the_gene_or_where_rows_are_short(verify):
    problem = PROBLEMS["softmax"]
    assert "_part0" not in _source(problem, TritonGenome(pass_block=64, pass_programs=0))
    # rows of 1501 and 2048-wide chunks: shorter than 8 chunks, one kernel at run time
    result = verify(_source(problem, TritonGenome(pass_block=2048, pass_programs=1024)), problem)
    assert result.ok and result.launches == 1, result


def test_a_scan_is_never_split(verify):
    problem = _one("cumsum", "return torch.cumsum(x, dim=1)", "[torch.randn(3, 1501)]")
    source = _source(problem, SPLIT)
    assert "_part0" not in source
    assert verify(source, problem).ok


def test_the_parts_compile_for_sm90(tmp_path: Path):
    """The split kernels (fp64 workspaces, a PARTS-wide load of the parts' results) compile
    for an H100, where the interpreter's loose typing does not apply."""
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    report = compile_for_h100(PROBLEMS["layernorm"], "strict", tmp_path, SPLIT)
    for kernel in ("_rows_part0", "_rows_final"):  # LayerNorm's two sums in one walk
        assert f"{kernel}: ok" in report, report
    assert "_rows_part1" not in report, report


def test_the_gene_takes_zero_or_a_power_of_two():
    assert TritonGenome(pass_programs=0).pass_programs == 0
    with pytest.raises(ValueError, match="pass_programs"):
        TritonGenome(pass_programs=100)


def test_one_long_row_runs_in_more_than_256_parts(verify):
    """One row (a whole-tensor norm): parts up to render_triton.MAX_PARTS, past the 256 that
    kept 37_FrobeniusNorm at 10% of the H200's roofline; here 512 parts of 8 chunks."""
    problem = _one("frobenius", "return x / torch.norm(x, p='fro')", "[torch.randn(1, 262139)]")
    source = _source(problem, TritonGenome(pass_block=64, pass_programs=4096))
    result = verify(source, problem)
    assert result.ok, result.message
    assert result.launches >= 2


WHOLE = {  # a reduction of every element of a 4-D input: 3 rows of 700 x 5 x 4
    "frobenius": "return x / torch.norm(x, p='fro')",
    "sum": "return x.sum()",
    "mean_of_squares": "return torch.mean(x * x)",
    "l1": "return torch.sum(torch.abs(x))",
}


@pytest.mark.parametrize("name", sorted(WHOLE))
@pytest.mark.parametrize("rand", ["rand", "randn"])
def test_a_whole_tensor_statistic_takes_rows_of_the_leading_dim(verify, name, rand):
    """Rows of every dim but the first (split.WHOLE_ROWS): each a long row pass in parts,
    then a short pass over the 3 rows' results. Rows of the last dim alone left 37_Frobenius'
    second pass (one program) walking 3.7 M results."""
    problem = _one(name, WHOLE[name], f"[torch.{rand}(3, 700, 5, 4)]")
    source = _source(problem, SPLIT)
    assert "x.reshape(-1, x.shape[1:].numel())" in source
    assert "_part0[(R, " in source
    result = verify(source, problem)
    assert result.ok, result.message
