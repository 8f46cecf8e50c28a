"""The operator families beyond GEMM epilogues, compiled and run on the GPU through the
evaluator: the builtin agent's seed for each verifies under strict on cuda-triton (what the
interpreter cannot show: real compiles, real launches, float32 on the device)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kforge_search.agents.base import Context
from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem

pytestmark = pytest.mark.gpu

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def problem_source(forward: str, inputs: str, init: str = "", init_inputs: str = "[]") -> str:
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    setup = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) if init else ""
    return (
        HEAD
        + "class Model(nn.Module):\n"
        + "    def __init__(self):\n        super(Model, self).__init__()\n"
        + (setup + "\n" if setup else "")
        + "\n    def forward(self, x, y=None, z=None):\n"
        + body
        + f"\n\n\ndef get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n"
        + f"    return {init_inputs}\n"
    )


# (name, forward, inputs, init): our own programs, one per family, odd sizes
FAMILIES = [
    ("gelu_chain", "return F.gelu(x) * torch.sigmoid(x) + 0.5", "[torch.randn(129, 1031)]", ""),
    ("softmax_dim1", "return torch.softmax(x, dim=1)", "[torch.randn(67, 2053)]", ""),
    (
        "layernorm_3d",
        "return self.ln(x)",
        "[torch.rand(6, 17, 33, 29)]",
        "self.ln = nn.LayerNorm((17, 33, 29))",
    ),
    (
        "instance_norm",
        "return self.norm(x)",
        "[torch.randn(5, 7, 31, 37)]",
        "self.norm = nn.InstanceNorm2d(7)",
    ),
    ("sum_middle", "return torch.sum(x, dim=1)", "[torch.rand(9, 515, 301)]", ""),
    ("argmin_middle", "return torch.argmin(x, dim=1)", "[torch.randn(7, 301, 129)]", ""),
    (
        "rms_channels",
        "return x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5)",
        "[torch.randn(4, 19, 23, 41)]",
        "",
    ),
    ("frobenius", "return x / torch.norm(x, p='fro')", "[torch.randn(11, 13, 257)]", ""),
    (
        "mse",
        "return torch.mean((x - y) ** 2)",
        "[torch.rand(123, 4099), torch.rand(123, 4099)]",
        "",
    ),
    (
        "cross_entropy",
        "return F.cross_entropy(x, y)",
        "[torch.randn(257, 1000), torch.randint(0, 1000, (257,))]",
        "",
    ),
    (
        "sdpa",
        "return F.scaled_dot_product_attention(x, y, z)",
        "[torch.randn(2, 3, 129, 64), torch.randn(2, 3, 129, 64), torch.randn(2, 3, 129, 64)]",
        "",
    ),
    ("cumsum", "return torch.cumsum(x, dim=1)", "[torch.rand(33, 5000)]", ""),
    (
        "maxpool2d",
        "return F.max_pool2d(x, 3, stride=2, padding=1, dilation=2)",
        "[torch.randn(3, 5, 67, 61)]",
        "",
    ),
    (
        "avgpool3d",
        "return F.avg_pool3d(x, 3, stride=2, padding=1)",
        "[torch.rand(2, 3, 17, 19, 23)]",
        "",
    ),
    (
        "groupnorm_4d",
        "return self.norm(x)",
        "[torch.randn(3, 12, 19, 23)]",
        "self.norm = nn.GroupNorm(4, 12)",
    ),
    (
        "batchnorm2d_train",
        "return self.bn(x)",
        "[torch.randn(5, 7, 13, 17)]",
        "self.bn = nn.BatchNorm2d(7)",
    ),
    (
        "softmax_fp16",
        "return torch.softmax(x, dim=-1)",
        "[torch.randn(37, 1031, dtype=torch.float16)]",
        "",
    ),
    (
        "gelu_chain_bf16",
        "return F.gelu(x) * torch.sigmoid(x) + 0.5",
        "[torch.randn(129, 515, dtype=torch.bfloat16)]",
        "",
    ),
    (
        "matmul_fp16",
        "return torch.matmul(x, y)",
        "[torch.randn(129, 257, dtype=torch.float16), torch.randn(257, 67, dtype=torch.float16)]",
        "",
    ),
    (
        "layernorm_bf16",
        "return F.layer_norm(x, (1031,))",
        "[torch.randn(33, 1031, dtype=torch.bfloat16)]",
        "",
    ),
]


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=("eager",)))


@pytest.mark.parametrize(
    ("name", "forward", "inputs", "init"), FAMILIES, ids=[f[0] for f in FAMILIES]
)
def test_family_seed_verifies_on_gpu(evaluator, tmp_path: Path, name, forward, inputs, init):
    path = tmp_path / f"{name}.py"
    path.write_text(problem_source(forward, inputs, init))
    problem = load_problem(path)
    platform = get_platform("cuda-triton")
    (draft,) = BuiltinAgent().propose(Context(problem, platform, "strict"))
    candidate = tmp_path / "candidate.py"
    candidate.write_text(draft.source)
    result = evaluator.evaluate(candidate, problem, platform)
    assert result.status is Status.OK, result.message
    assert result.timing.meaningful


# (name, forward, inputs, init): GEMMs whose bf16 drafts cast A (and an input B) once per call
BF16_GEMMS = [
    ("linear", "return torch.relu(self.fc(x))", "[torch.randn(257, 1024)]",
     "self.fc = nn.Linear(1024, 515)"),
    ("inputs_kn", "return torch.matmul(x, y)", "[torch.randn(259, 512), torch.randn(512, 387)]",
     ""),
    ("batched", "return torch.bmm(x, y)", "[torch.randn(3, 129, 256), torch.randn(3, 256, 67)]",
     ""),
]  # fmt: skip


@pytest.mark.parametrize(("name", "forward", "inputs", "init"), BF16_GEMMS,
                         ids=[g[0] for g in BF16_GEMMS])  # fmt: skip
def test_a_bf16_gemm_reads_both_operands_in_bf16_and_verifies_loose(
    tmp_path: Path, name, forward, inputs, init
):
    import dataclasses

    from kforge_search.agents.builtin.agent import seed_genome

    path = tmp_path / f"{name}.py"
    path.write_text(problem_source(forward, inputs, init))
    problem = load_problem(path)
    platform = get_platform("cuda-triton")
    agent = BuiltinAgent()
    seed = seed_genome(agent.plan(problem), platform, "loose")
    draft = agent.synthesize(problem, platform, dataclasses.replace(seed, precision="bf16"), "t")
    assert "a0 = a0.to(torch.bfloat16) if a0.is_cuda else a0" in draft.source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(draft.source)
    loose = Evaluator(EvalConfig(policy="loose", baselines=("eager",)))
    try:
        result = loose.evaluate(candidate, problem, platform)
    finally:
        loose.close()
    assert result.status is Status.OK, result.message
