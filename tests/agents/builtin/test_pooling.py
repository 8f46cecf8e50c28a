"""Max and average pooling of a program's input (1-3 spatial dims, padding, strides other
than the kernel, dilation, ceil_mode, count_include_pad): a stage anchored by the window
reduction, elementwise ops after it in the same kernel. Checked under Triton's interpreter
(cpu-triton) and on cpu-cpp, with seed and small-tile genomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.patterns import make

AGENT = BuiltinAgent()
GENOMES = {
    "cpu-triton": TritonGenome(),
    "cpu-triton-small": TritonGenome(block_m=16, block_n=16, placement="second_pass"),
    "cpu-cpp": CppGenome(),
    "cpu-cpp-small": CppGenome(block_m=8, block_n=16, parallel_work=1),
}


def _module(name: str, module: str, forward: str, inputs: str, init_inputs: str = "[]"):
    params = "k, s, p, d" if init_inputs != "[]" else ""
    return make(name, forward, init=module, inputs=inputs, init_inputs=init_inputs, params=params)


PROBLEMS = {
    # sizes from the model's attributes, read at run time; windows past the end (ceil_mode)
    "max1d_dilated_ceil": _module(
        "max1d_dilated_ceil",
        "self.pool = nn.MaxPool1d(k, stride=s, padding=p, dilation=d, ceil_mode=True)",
        "return torch.tanh(self.pool(x)) + 0.5",
        "[torch.randn(3, 5, 37)]",
        "[4, 3, 2, 2]",
    ),
    "max2d_rect_ceil": _module(
        "max2d_rect_ceil",
        "pass",
        # the last window along the columns would start in the right padding: dropped
        "return F.max_pool2d(x, (3, 2), stride=(2, 2), padding=(1, 1), dilation=(2, 1), "
        "ceil_mode=True) * 2.0 - 1.0",
        "[torch.randn(2, 3, 17, 13)]",
    ),
    "max3d_dilated": _module(
        "max3d_dilated",
        "self.pool = nn.MaxPool3d((2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 0), "
        "dilation=(2, 1, 1))",
        "return torch.relu(self.pool(x) - 0.5)",
        "[torch.rand(2, 3, 7, 9, 10)]",
    ),
    # count_include_pad=False: edge windows divide by their elements within the input
    "avg1d_exclude_pad_ceil": _module(
        "avg1d_exclude_pad_ceil",
        "self.pool = nn.AvgPool1d(5, stride=3, padding=2, ceil_mode=True, count_include_pad=False)",
        "return self.pool(x) * 3.0",
        "[torch.randn(4, 3, 29)]",
    ),
    # count_include_pad=True with ceil_mode: the last window ends at the padding, not at k
    "avg2d_include_pad_ceil": _module(
        "avg2d_include_pad_ceil",
        "pass",
        "return F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)",
        "[torch.rand(2, 4, 14, 16)]",
    ),
    "avg3d_exclude_pad": _module(
        "avg3d_exclude_pad",
        "self.pool = nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False)",
        "return self.pool(x)",
        "[torch.randn(2, 2, 9, 8, 11)]",
    ),
    "avg2d_stride_is_kernel": _module(
        "avg2d_stride_is_kernel",
        "self.pool = nn.AvgPool2d(k)",
        "return torch.sigmoid(self.pool(x))",
        "[torch.rand(2, 3, 19, 23)]",
        "[4, 0, 0, 0]",
    ),
    "max2d_non_contiguous": _module(
        "max2d_non_contiguous",
        "pass",
        "return F.max_pool2d(x, 3, stride=2, padding=1)",
        "[torch.randn(2, 3, 13, 16).transpose(2, 3)]",
    ),
    "max2d_unbatched": _module(
        "max2d_unbatched",
        "pass",
        "return F.max_pool2d(x, 2, stride=1, padding=1)",
        "[torch.randn(3, 15, 14)]",
    ),
    "max2d_softmax": _module(
        "max2d_softmax",
        "pass",
        "return torch.softmax(F.max_pool2d(x, 2, 2), dim=-1)",
        "[torch.randn(2, 3, 10, 41)]",
    ),
    "avg2d_plus_input": make(
        "avg2d_plus_input",
        "return F.avg_pool2d(x, 3, 2, 1) + y",
        init="pass",
        inputs="[torch.randn(2, 3, 11, 9), torch.randn(2, 3, 6, 5)]",
        init_inputs="[]",
        params="",
        args="x, y",
    ),
}
FUSED = {n for n in PROBLEMS if n not in ("max2d_softmax",)}  # one kernel does it all


def _source(problem, genome_name: str) -> str:
    platform = get_platform(genome_name.removesuffix("-small"))
    draft = AGENT.synthesize(problem, platform, GENOMES[genome_name], "test")
    assert not hasattr(draft, "message"), draft.message
    return draft.source


@pytest.mark.parametrize("genome", sorted(GENOMES))
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_pooling_verifies(verify, name, genome):
    result = verify(_source(PROBLEMS[name], genome), PROBLEMS[name])
    assert result.ok, result.message
    if name in FUSED and "triton" in genome:  # the window and what follows: one launch
        assert result.launches == 1, result.launches


def test_the_input_is_read_through_its_strides():
    """Triton reads a non-contiguous input where it lies: no copy in the forward."""
    source = _source(PROBLEMS["max2d_non_contiguous"], "cpu-triton")
    assert "contiguous" not in source.split("def forward", 1)[1]


def _refusal(forward: str, init: str = "pass") -> str:
    problem = make("refused", forward, init=init, inputs="[torch.randn(2, 3, 8, 8)]",
                   init_inputs="[]", params="")  # fmt: skip
    result = analyze(problem)
    assert isinstance(result, Unsupported), result
    return result.message


def test_what_pooling_refuses_says_why():
    indices = _refusal("return self.pool(x)[0]", "self.pool = nn.MaxPool2d(2, return_indices=True)")
    assert "max_pool2d" in indices and "return_indices" in indices
    functional = _refusal("return F.max_pool2d(x, 2, return_indices=True)[0]")
    assert "return_indices" in functional
    divisor = _refusal("return F.avg_pool2d(x, 2, divisor_override=3)")
    assert "avg_pool2d" in divisor and "divisor_override" in divisor
    computed = _refusal("return F.max_pool2d(x * 2.0, 3, 1, 1)")
    assert "computed value" in computed


KERNELBENCH = Path(__file__).resolve().parents[3].parent / "shared" / "kernelbench" / "level1"
LEVEL1 = ("41_", "42_", "43_", "44_", "45_", "46_")


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench level1 is not here")
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
@pytest.mark.parametrize("prefix", LEVEL1)
def test_kernelbench_level1_pooling_verifies(verify, prefix, platform):
    found = sorted(KERNELBENCH.glob(f"{prefix}*.py"))
    assert len(found) == 1, found
    problem = load_problem(found[0]).resized("ci")
    result = verify(_source(problem, platform), problem)
    assert result.ok, result.message
