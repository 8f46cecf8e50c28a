"""A stage over an input's swapped leading dims (ir.Gemm.swap_of): BatchNorm1d/2d/3d of
[N, C, *pixels] takes per-channel statistics, each channel a row of N runs of PLANE
elements at C * PLANE apart. The kernels read the input there and write the output in its
layout; before, the forward copied x.transpose(0, 1) to rows and returned a permuted view
(H200, 33_BatchNorm: 9.85 ms, torch.compile 2.96). Here, on Triton's interpreter, each
program verifies (outputs, running statistics) at odd sizes, from torch.rand and
torch.randn, non-contiguous inputs included, in the fused tile, the row pass, the row pass
in parts, with several rows per program and with int64 offsets."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from kforge_search.agents.builtin import BuiltinAgent, TritonGenome
from kforge_search.agents.builtin.agent import seed_genome
from kforge_search.agents.builtin.convert import Leaf
from kforge_search.agents.builtin.ir import Gemm, UnsupportedError
from kforge_search.agents.builtin.render_triton import _wide
from kforge_search.platforms import get_platform
from tests.agents.builtin.patterns import make

COPY = re.compile(r"transpose\(0, 1\)\.(reshape|contiguous)")  # the old transposed copy
AGENT = BuiltinAgent()
CPU = get_platform("cpu-triton")
ROWS = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=0, placement="second_pass")
SPLIT = TritonGenome(pass_block=64, pass_programs=1024, placement="second_pass")
AFFINE = "nn.init.normal_(self.bn.weight)\nnn.init.normal_(self.bn.bias)"
RUNNING = "self.bn.running_mean.uniform_(-1, 1)\nself.bn.running_var.uniform_(0.5, 2)"


def _bn(name: str, module: str, inputs: str, forward: str = "return self.bn(x)", more: str = ""):
    init = f"self.bn = nn.{module}\n{AFFINE}" + (f"\n{more}" if more else "")
    return make(name, forward, init=init, params="", args="x", init_inputs="[]", inputs=inputs)


PROBLEMS = {
    "bn1d_train": _bn("bn1d_train", "BatchNorm1d(5)", "[torch.randn(3, 5, 7)]"),
    "bn1d_eval": _bn("bn1d_eval", "BatchNorm1d(5)", "[torch.rand(4, 5, 9)]",
                     more=f"{RUNNING}\nself.bn.eval()"),
    "bn2d_train": _bn("bn2d_train", "BatchNorm2d(5)", "[torch.randn(3, 5, 7, 9)]"),
    "bn2d_train_rand": _bn("bn2d_train_rand", "BatchNorm2d(5)", "[torch.rand(3, 5, 7, 9)]",
                           forward="return torch.relu(self.bn(x)) * 2.0"),
    "bn2d_eval": _bn("bn2d_eval", "BatchNorm2d(5)", "[torch.randn(3, 5, 7, 9)]",
                     more=f"{RUNNING}\nself.bn.eval()"),
    "bn2d_cumulative": _bn("bn2d_cumulative", "BatchNorm2d(3, momentum=None)",
                           "[torch.rand(7, 3, 1, 1)]"),
    # non-contiguous inputs: read through a copy in their logical layout
    "bn2d_transposed_input": _bn("bn2d_transposed_input", "BatchNorm2d(5)",
                                 "[torch.randn(5, 3, 7, 9).transpose(0, 1)]"),
    "bn2d_channels_last": _bn("bn2d_channels_last", "BatchNorm2d(5)",
                              "[torch.rand(3, 7, 9, 5).permute(0, 3, 1, 2)]"),
    "bn3d_train": _bn("bn3d_train", "BatchNorm3d(4)", "[torch.randn(3, 4, 5, 3, 7)]"),
    "bn3d_eval": _bn("bn3d_eval", "BatchNorm3d(4)", "[torch.rand(3, 4, 5, 3, 7)]",
                     more=f"{RUNNING}\nself.bn.eval()"),
}  # fmt: skip
TRAINING = ["bn1d_train", "bn2d_train", "bn3d_train"]
# rows of 5 * 13 * 17 = 1105 elements: two parts of 64-wide chunks (render_triton._split_pass)
LONG = _bn("bn2d_long", "BatchNorm2d(3)", "[torch.randn(5, 3, 13, 17)]")


def _source(problem, genome: TritonGenome | None = None) -> str:
    if genome is None:
        genome = seed_genome(AGENT.plan(problem), CPU, "strict")
    draft = AGENT.synthesize(problem, CPU, genome, "test")
    assert not hasattr(draft, "message"), draft
    return draft.source


def _forward(source: str) -> list[str]:
    return source[source.index("    def forward(") :].splitlines()


def assert_in_place(source: str) -> None:
    """No transposed copy in, no permuted view out: the kernels index the input's layout."""
    forward = _forward(source)
    copies = [line for line in forward if COPY.search(line)]
    assert not copies, copies
    assert "PLANE = x.shape[2:].numel()" in source
    assert "t0 = x.reshape(x.shape[0], -1).contiguous()" in source, forward
    (out,) = [line for line in forward if line.strip().startswith("return ")]
    assert ".permute(" not in out, out


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_channel_statistics_read_the_input_in_place(verify, name):
    source = _source(PROBLEMS[name])
    assert_in_place(source)
    result = verify(source, PROBLEMS[name])
    assert result.ok, result.message


@pytest.mark.parametrize("name", TRAINING)
def test_the_row_pass_reads_and_writes_in_place(verify, name):
    source = _source(PROBLEMS[name], ROWS)
    assert_in_place(source)
    assert "_kf_s0_rows[" in source and "_kf_s0_fused" not in source
    result = verify(source, PROBLEMS[name])
    assert result.ok, result.message


def test_the_row_pass_in_parts(verify):
    source = _source(LONG, SPLIT)
    assert_in_place(source)
    assert "_part0[(R, " in source and "_final[(R, " in source
    result = verify(source, LONG)
    assert result.ok, result.message
    assert result.launches >= 2  # the parts, then the outputs


@pytest.mark.parametrize("name", TRAINING)
def test_several_rows_per_program(verify, name):
    """RPP 4 rows (channels) per program: 5 channels (1d, 2d) in a program of four and one
    of one, 4 (3d) in one."""
    source = _source(PROBLEMS[name], ROWS)
    for default, lowered in [
        ("_KF_RPP = 32", "_KF_RPP = 4"),
        ("_KF_MANY_ROWS = 65536", "_KF_MANY_ROWS = 1"),
    ]:
        assert default in source
        source = source.replace(default, lowered)
    result = verify(source, PROBLEMS[name])
    assert result.ok, result.message


@pytest.mark.parametrize("genome", [None, ROWS, SPLIT], ids=["seed", "rows", "split"])
def test_wide_offsets(verify, genome):
    """int64 offsets (WIDE; the split kernels always) give the same result."""
    problem = LONG if genome is SPLIT else PROBLEMS["bn2d_train"]
    source = _source(problem, genome)
    assert "_KF_NARROW = 2**31" in source and "WIDE=max(" in source
    result = verify(source.replace("_KF_NARROW = 2**31", "_KF_NARROW = 1"), problem)
    assert result.ok, result.message


def test_wide_counts_the_tensor_not_its_row_length():
    """A swapped stage's row (a channel) is not a row of the tensor: its offsets reach the
    tensor's size, which R + 256 rows of ld (C * PLANE) do not bound when N > C + 256."""
    args = ["t0", "t0.shape[-1]", "PLANE", "b9", "b9.shape[-1]", "R"]
    c, plane, n = 3, 2**20, 1024  # 3.2e9 elements: int32 offsets would wrap
    t = SimpleNamespace(shape=(n, c * plane), numel=lambda: n * c * plane)
    names = {"R": c, "t0": t, "b9": t, "_KF_NARROW": 2**31}
    assert eval(_wide(args), names) is False  # the rows' bound alone
    assert eval(_wide(args, swapped=True), names) is True
    small = SimpleNamespace(shape=(5, c * 64), numel=lambda: 5 * c * 64)
    assert eval(_wide(args, swapped=True), {**names, "t0": small, "b9": small}) is False


def test_the_ir_names_the_swapped_input():
    """The anchor keeps its view (`a`, what the C++ library copies to rows) and names the
    input the Triton kernels read in place; a swap is of the leading dims of rank 3 or more."""
    from kforge_search.agents.builtin.desugar import swap_lead

    plan = AGENT.plan(PROBLEMS["bn2d_train"])
    (gemm,) = [n for n in plan.graph.nodes if isinstance(n, Gemm)]
    assert (gemm.a, gemm.swap_of, gemm.cols_from) == ("x.transpose(0, 1)", "x", 1)
    with pytest.raises(UnsupportedError):
        swap_lead(Leaf("x", (3, 5)))  # two dims: a matrix transpose, not this
