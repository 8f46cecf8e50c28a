"""The operator families beyond GEMM epilogues (issue 22) verify in this process on the
Triton interpreter and cpu-cpp: our own small programs, torch.rand and torch.randn inputs,
odd sizes, a non-contiguous input. KernelBench's level 1 (the files as published, from
../shared) must convert: all 65 of its non-convolution problems."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import assert_draft_verifies
from tests.agents.builtin.test_families_gpu import FAMILIES, problem_source
from tests.conftest import ROOT

AGENT = BuiltinAgent()
KERNELBENCH = ROOT.parent / "shared" / "kernelbench" / "level1"
RANDOM_AFFINE = "nn.init.normal_(self.gn.weight)\nnn.init.normal_(self.gn.bias)"
# our own, beside the GPU test's: rand inputs, a non-contiguous input, argmax over the columns
MORE = [
    ("softmax_noncontig", "return torch.softmax(x, dim=1)", "[torch.randn(37, 129).t()]", ""),
    ("selu_rand", "return torch.selu(x) - F.softsign(x) + self.act(x)", "[torch.rand(7, 3, 257)]",
     "self.act = nn.Softsign()"),
    ("argmax_cols", "return torch.argmax(x, dim=-1)", "[torch.randn(33, 517)]", ""),
    ("huber_sum", "return F.smooth_l1_loss(x, y, reduction='sum', beta=0.5)",
     "[torch.randn(19, 301), torch.randn(19, 301)]", ""),
    ("kl_batchmean", "return F.kl_div(torch.log(x), y, reduction='batchmean')",
     "[torch.rand(13, 257).softmax(-1), torch.rand(13, 257).softmax(-1)]", ""),
    ("triplet", "return self.loss(x, y, z)",
     "[torch.rand(29, 130), torch.rand(29, 130), torch.rand(29, 130)]",
     "self.loss = nn.TripletMarginLoss(margin=1.0)"),
    ("mean_all_3d", "return x.mean() + x.amax()", "[torch.randn(5, 31, 67)]", ""),
    ("l1_norm_rows", "return x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
     "[torch.randn(23, 1027)]", ""),
    ("scalar_input", "return x * y", "[torch.randn(17, 33), 3.5]", ""),
    ("batchnorm2d_train", "return torch.relu(self.bn(x))", "[torch.randn(6, 5, 7, 9)]",
     "self.bn = nn.BatchNorm2d(5)"),
    ("batchnorm3d_eval", "return self.bn(x) * 2.0", "[torch.rand(3, 4, 5, 6, 7)]",
     "self.bn = nn.BatchNorm3d(4)\nself.bn.eval()"),
    # GroupNorm of an input [N, C, *pixels]: statistics per C / G channels, the affine
    # weight and bias per channel (random, so that a wrong channel shows)
    ("groupnorm_4d", "return self.gn(x)", "[torch.randn(4, 6, 5, 7)]",
     "self.gn = nn.GroupNorm(3, 6)\n" + RANDOM_AFFINE),
    ("groupnorm_3d_plain", "return self.gn(x) * 2.0", "[torch.rand(5, 8, 33)]",
     "self.gn = nn.GroupNorm(4, 8, affine=False)"),
    ("groupnorm_5d_residual", "return torch.relu(self.gn(x)) + x", "[torch.randn(2, 6, 3, 5, 7)]",
     "self.gn = nn.GroupNorm(2, 6)\n" + RANDOM_AFFINE),
    ("group_norm_f_per_channel", "return F.group_norm(x, 6, self.w, self.b, eps=1e-3)",
     "[torch.rand(3, 6, 9, 11)]",
     "self.w = nn.Parameter(torch.randn(6))\nself.b = nn.Parameter(torch.randn(6))"),
    ("groupnorm_one_group", "return self.gn(x)", "[torch.rand(3, 4, 6, 5)]",
     "self.gn = nn.GroupNorm(1, 4)\nnn.init.normal_(self.gn.weight)"),
    # a per-channel (C, 1, 1) or (C, H, 1) parameter against [N, C, H, W] columns
    ("layernorm_channel_bias", "return self.ln(x) * self.s + self.b", "[torch.randn(3, 5, 7, 9)]",
     "self.ln = nn.LayerNorm((5, 7, 9))\nself.b = nn.Parameter(torch.randn(5, 1, 1))\n"
     "self.s = nn.Parameter(torch.randn(5, 7, 1))"),
]  # fmt: skip
CASES = [*FAMILIES, *MORE]
# On the interpreter (every program instance in numpy) the GPU test's sizes took up to 137 s
# a family: smaller odd sizes there, still several chunks per row (block_n 64) and several
# row blocks (block_m 16), with ragged edges
INTERPRETER_INPUTS = {
    "softmax_dim1": "[torch.randn(19, 517)]",
    "sum_middle": "[torch.rand(5, 131, 77)]",
    "argmin_middle": "[torch.randn(5, 131, 37)]",
    "mse": "[torch.rand(21, 1031), torch.rand(21, 1031)]",
    "cross_entropy": "[torch.randn(37, 203), torch.randint(0, 203, (37,))]",
    "cumsum": "[torch.rand(17, 1031)]",
    "softmax_fp16": "[torch.randn(19, 517, dtype=torch.float16)]",
    "layernorm_bf16": "[torch.randn(17, 1031, dtype=torch.bfloat16)]",
    "instance_norm": "[torch.randn(3, 5, 17, 19)]",
    "layernorm_3d": "[torch.rand(4, 7, 13, 11)]",
    "gelu_chain": "[torch.randn(37, 259)]",
    "rms_channels": "[torch.randn(2, 7, 11, 13)]",
    "frobenius": "[torch.randn(3, 7, 67)]",
}
INTERPRETER_INIT = {"layernorm_3d": "self.ln = nn.LayerNorm((7, 13, 11))"}


def _problem(tmp_path: Path, case: tuple[str, str, str, str]):
    name, forward, inputs, init = case
    path = tmp_path / f"{name}.py"
    path.write_text(problem_source(forward, inputs, init))
    return load_problem(path)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_family_verifies_on_the_interpreter(verify, tmp_path, case):
    name, forward, inputs, init = case
    small = INTERPRETER_INPUTS.get(name, inputs), INTERPRETER_INIT.get(name, init)
    problem = _problem(tmp_path, (name, forward, *small))
    genome = TritonGenome(block_m=16, block_n=64, pass_block=64)  # several chunks per row
    assert_draft_verifies(verify, problem, "cpu-triton", genome)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_family_verifies_on_cpu_cpp(verify, tmp_path, case):
    assert_draft_verifies(verify, _problem(tmp_path, case), "cpu-cpp", CppGenome())


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="../shared/kernelbench is not here")
def test_kernelbench_level1_converts():
    files = sorted(p for p in KERNELBENCH.glob("*.py") if "conv" not in p.name.lower())
    refused = {}
    for path in files:
        found = analyze(load_problem(path))
        if isinstance(found, Unsupported):
            refused[path.name] = found.message
    assert len(files) == 65
    assert not refused, refused


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="../shared/kernelbench is not here")
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
def test_kernelbench_group_norm_verifies_at_ci_sizes(verify, platform):
    problem = load_problem(KERNELBENCH / "35_GroupNorm_.py").resized("ci")
    genome = TritonGenome() if platform == "cpu-triton" else CppGenome()
    assert_draft_verifies(verify, problem, platform, genome)


@pytest.mark.skipif(
    not KERNELBENCH.is_dir() or not os.environ.get("KFORGE_SLOW"),
    reason="../shared/kernelbench absent, or KFORGE_SLOW unset (about 10 minutes)",
)
@pytest.mark.parametrize("platform", ["cpu-triton", "cpu-cpp"])
def test_kernelbench_level1_verifies_at_ci_sizes(verify, platform):
    files = sorted(p for p in KERNELBENCH.glob("*.py") if "conv" not in p.name.lower())
    genome = TritonGenome() if platform == "cpu-triton" else CppGenome()
    failed = {}
    for path in files:
        problem = load_problem(path).resized("ci")
        draft = AGENT.synthesize(problem, get_platform(platform), genome, "test")
        if hasattr(draft, "message"):
            continue
        result = verify(draft.source, problem)
        if not result.ok:
            failed[path.name] = result.message
    assert not failed, failed


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_family_verifies_with_its_row_passes_in_parts(verify, tmp_path, case):
    """Every family with each splittable row pass cut into parts of one chunk (the forward's
    8-chunk minimum lowered in the source: the interpreter's rows are short), so that the
    split kernels (triton_kernels.split_pass_kernels) of every pass structure run: column
    statistics first, segments then whole rows, statistics over the batch, low dtypes."""
    name, forward, inputs, init = case
    small = INTERPRETER_INPUTS.get(name, inputs), INTERPRETER_INIT.get(name, init)
    problem = _problem(tmp_path, (name, forward, *small))
    genome = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=4096)
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    assert "8 * pass_block" in draft.source or "_part0" not in draft.source
    result = verify(draft.source.replace("8 * pass_block", "pass_block"), problem)
    assert result.ok, result.message
