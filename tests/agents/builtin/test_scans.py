"""Scans along the last dim (issue 22, item 1): cumsum, cumprod, the reverse form (flip, scan,
flip), the exclusive form (cat of zeros and a scan of all but the last column) and the masked
form (x * a bool or integer mask). Each small problem (odd sizes, randn and rand inputs, a
non-contiguous input) is synthesized for cpu-triton (under Triton's interpreter, with chunks
small enough that the running total crosses several) and cpu-cpp, and verified against its
reference in this process; forms that are not scans are refused with the form they need."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Scan, Unsupported
from kforge_search.platforms import get_platform
from kforge_search.problem import exec_problem, load_problem
from tests.agents.builtin.patterns import make

AGENT = BuiltinAgent()


def _dim(name: str, forward: str, inputs: str, dim: int = 1):
    return make(name, forward, init="self.dim = dim", params="dim", init_inputs=f"[{dim}]",
                inputs=inputs)  # fmt: skip


def _xm(name: str, forward: str, x: str, mask: str):
    return make(name, forward, init="self.dim = dim", params="dim", init_inputs="[1]",
                args="x, mask", inputs=f"[{x}, {mask}]")  # fmt: skip


EXCLUSIVE = """
cumsum = torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), dim=self.dim)
zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
return torch.cat((zeros, cumsum), dim=self.dim)
"""
EXCLUSIVE_PROD = """
head = torch.ones_like(x.select(-1, 0).unsqueeze(-1))
return torch.cat([head, torch.cumprod(x.narrow(-1, 0, x.size(-1) - 1), -1)], -1)
"""

PROBLEMS = {
    "cumsum": _dim("cumsum", "return torch.cumsum(x, dim=self.dim)", "[torch.randn(5, 77)]"),
    "cumsum_last": _dim("cumsum_last", "return x.cumsum(-1)", "[torch.rand(3, 7, 77)]"),
    "cumsum_long": _dim("cumsum_long", "return torch.cumsum(x, self.dim)", "[torch.rand(3, 601)]"),
    "cumsum_noncontiguous": _dim("cumsum_noncontiguous", "return torch.cumsum(x, dim=self.dim)",
                                 "[torch.randn(77, 5).t()]"),
    "cumprod": _dim("cumprod", "return torch.cumprod(x, dim=self.dim)",
                    "[torch.rand(5, 77) + 0.5]"),
    "cumprod_randn": _dim("cumprod_randn", "return torch.cumprod(x, dim=self.dim)",
                          "[torch.randn(5, 301)]"),
    "reverse": _dim("reverse", "return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)",
                    "[torch.randn(5, 77)]"),
    "reverse_long": _dim("reverse_long",
                         "return torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])",
                         "[torch.rand(3, 601)]"),
    "reverse_cumprod": _dim("reverse_cumprod",
                            "return x.flip(-1).cumprod(-1).flip(-1) * 3.0",
                            "[torch.rand(5, 77) + 0.5]"),
    "exclusive": _dim("exclusive", EXCLUSIVE, "[torch.randn(5, 77)]"),
    "exclusive_long": _dim("exclusive_long", EXCLUSIVE, "[torch.rand(3, 601)]"),
    "exclusive_prod": _dim("exclusive_prod", EXCLUSIVE_PROD, "[torch.rand(4, 3, 77) + 0.5]"),
    "masked": _xm("masked", "return torch.cumsum(x * mask, dim=self.dim)",
                  "torch.rand(5, 77)", "torch.randint(0, 2, (5, 77)).bool()"),
    "masked_int": _xm("masked_int", "return torch.cumsum(x * mask, dim=self.dim)",
                      "torch.randn(5, 301)", "torch.randint(-2, 3, (5, 301))"),
    "mask_first": _xm("mask_first", "return torch.cumsum(mask * x - x / 2, dim=self.dim)",
                      "torch.randn(5, 77)", "torch.rand(5, 77) > 0.5"),
    "mask_row": _xm("mask_row", "return torch.cumsum(x * mask, dim=self.dim)",
                    "torch.randn(5, 77)", "torch.randint(0, 2, (5, 1), dtype=torch.int32)"),
    "after": _dim("after", "return torch.relu(torch.cumsum(x, dim=self.dim) * 2.0 - 1.0) + x",
                  "[torch.randn(5, 77)]"),
    "exclusive_after": _dim("exclusive_after", EXCLUSIVE.replace("return ", "y = ")
                            + "\nreturn y * x + y", "[torch.randn(5, 77)]"),
    "softmax_of_scan": _dim("softmax_of_scan", "return torch.softmax(torch.cumsum(x, 1), dim=1)",
                            "[torch.randn(5, 77)]"),
    "scan_of_softmax": _dim("scan_of_softmax", "return torch.cumsum(torch.softmax(x, dim=1), 1)",
                            "[torch.randn(5, 77)]"),
    "scan_over_sum": _dim("scan_over_sum",
                          "return torch.cumsum(x, 1) / x.abs().sum(1, keepdim=True)",
                          "[torch.randn(5, 77)]"),
    "two_scans": _dim("two_scans", "return torch.cumsum(torch.cumsum(x, 1), 1) + x.cumprod(1)",
                      "[torch.rand(5, 77)]"),
    "linear_cumsum": make("linear_cumsum", "return torch.cumsum(torch.tanh(self.linear(x)), 1)",
                          inputs="[torch.randn(13, 40)]"),
}  # fmt: skip

REFUSED = {
    "over_rows": (_dim("over_rows", "return torch.cumsum(x, dim=0)", "[torch.randn(5, 7)]"),
                  "cumsum"),
    "flip_alone": (_dim("flip_alone", "return x.flip(1) * 2.0", "[torch.randn(5, 7)]"), "flip"),
    "scan_flipped": (_dim("scan_flipped", "return torch.cumsum(x.flip(1), 1)",
                          "[torch.randn(5, 7)]"), "cumsum"),
    "narrow_literal": (_dim("narrow_literal", "return torch.cumsum(x.narrow(1, 0, 6), 1)",
                            "[torch.randn(5, 7)]"), "narrow"),
    "cat_other": (_dim("cat_other", "return torch.cat((x, x), dim=1)", "[torch.randn(5, 7)]"),
                  "cat"),
    "cat_wrong_fill": (_dim("cat_wrong_fill", EXCLUSIVE.replace("zeros_like", "ones_like"),
                            "[torch.randn(5, 7)]"), "cat"),
    "int_result": (_xm("int_result", "return torch.cumsum(x * (mask * 2), dim=1)",
                        "torch.randn(5, 7)", "torch.rand(5, 7) > 0.5"), "a non-float32 result"),
    "mask_not_arithmetic": (_xm("mask_not_arithmetic", "return torch.cumsum(x * ~mask, 1)",
                                "torch.randn(5, 7)", "torch.rand(5, 7) > 0.5"),
                            "a bool or integer input"),
    "double_input": (_dim("double_input", "return torch.cumsum(x, 1)",
                          "[torch.randn(5, 7).double()]"), "dtype"),  # float16: test_dtypes
}  # fmt: skip

TRITON = {
    "seed": TritonGenome(),
    "chunks": TritonGenome(placement="second_pass", pass_block=64, pass_warps=2),
}
SMALL_CPP = CppGenome(block_m=8, block_n=16, block_k=16, parallel_work=1)


def _source(problem, platform: str, genome) -> str:
    draft = AGENT.synthesize(problem, get_platform(platform), genome, "test")
    assert not hasattr(draft, "message"), draft
    return draft.source


def test_the_problems_have_scans():
    for name, problem in PROBLEMS.items():
        plan = analyze(problem)
        assert not isinstance(plan, Unsupported), f"{name}: {plan.message}"
        assert any(isinstance(n, Scan) for n in plan.graph.nodes), name


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
    for name in ("cumsum_long", "exclusive_prod", "masked", "softmax_of_scan", "linear_cumsum"):
        result = verify(_source(PROBLEMS[name], "cpu-cpp", SMALL_CPP), PROBLEMS[name])
        assert result.ok, f"{name}: {result.message}"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_a_reason(name):
    problem, op = REFUSED[name]
    result = analyze(problem)
    assert isinstance(result, Unsupported), result
    assert result.op.startswith(op), result.message


def test_a_scan_read_back_only_where_later_steps_need_it():
    """cumsum(x) * 2 is computed in the scan's walk (no buffer of the scan); softmax of a
    scan reads it back (its statistics walk the row again)."""
    for name, buffered in (("after", False), ("softmax_of_scan", True), ("two_scans", True)):
        plan = analyze(PROBLEMS[name])
        assert not isinstance(plan, Unsupported)
        scan = next(n.id for n in plan.graph.nodes if isinstance(n, Scan))
        assert (scan in plan.stages[-1].outs) is buffered, name


@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
def test_long_rows_against_float64(tmp_path: Path, platform, verify):
    """4 x 32768 torch.rand values (KernelBench's rows, fewer of them): the running sums
    reach ~16000; fp32 chunk scans with a running total carried in fp64 (double sums in
    C++) stay within a few float32 ulps of the float64 result, no worse than torch's own."""
    import torch

    from tests.agents.builtin.harness import load_candidate

    problem = _dim("cumsum_rows", "return torch.cumsum(x, dim=self.dim)", "[torch.rand(4, 32768)]")
    genome = TritonGenome() if platform == "cpu-triton" else CppGenome()
    model = load_candidate(_source(problem, platform, genome), tmp_path / "long.py")(1)
    torch.manual_seed(0)
    x = torch.rand(4, 32768)
    exact = torch.cumsum(x.double(), 1)
    ours = (model(x).double() - exact).abs().max().item()
    theirs = (torch.cumsum(x, 1).double() - exact).abs().max().item()
    ulp = torch.finfo(torch.float32).eps * exact.abs().max().item()
    assert ours <= max(4 * ulp, theirs), (ours, theirs, ulp)


KERNELBENCH = Path(__file__).resolve().parents[3].parent / "shared" / "kernelbench" / "level1"
LEVEL1 = ("89_", "90_", "91_", "92_", "93_")


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="KernelBench level1 is not here")
@pytest.mark.parametrize("prefix", LEVEL1)
def test_kernelbench_level1_scans_verify(verify, prefix):
    found = sorted(KERNELBENCH.glob(f"{prefix}*.py"))
    assert len(found) == 1, found
    problem = load_problem(found[0]).resized("ci")
    for platform, genome in (("cpu-triton", TRITON["chunks"]), ("cpu-cpp", CppGenome())):
        result = verify(_source(problem, platform, genome), problem)
        assert result.ok, f"{platform}: {result.message}"


def test_the_mask_inputs_are_not_all_ones():
    """A kernel that ignored the mask would pass only on an all-true mask."""
    _, mask = exec_problem(PROBLEMS["masked"]).get_inputs()
    assert mask.dtype.is_floating_point is False and 0 < int(mask.sum()) < mask.numel()
