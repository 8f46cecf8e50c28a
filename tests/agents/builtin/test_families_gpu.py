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


# (name, forward, inputs, init, product): GEMMs whose bf16 drafts cast A (and an input B) once
# per call; `product`: the GEMM in PyTorch (m: the model, then the inputs)
BF16_GEMMS = [
    ("linear", "return self.fc(x)", "[torch.randn(257, 1024)]",
     "self.fc = nn.Linear(1024, 515)", "x @ m.fc.weight.T + m.fc.bias"),
    ("inputs_kn", "return torch.matmul(x, y)", "[torch.randn(259, 512), torch.randn(512, 387)]",
     "", "x @ y"),
    ("batched", "return torch.bmm(x, y)", "[torch.randn(3, 129, 256), torch.randn(3, 256, 67)]",
     "", "torch.bmm(x, y)"),
]  # fmt: skip

# run in a fresh process: Triton kernels of this (test) process are the interpreter's
BF16_CHECK = """
import importlib.util, sys
import torch
candidate, problem, product = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("kf_bf16", candidate)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
namespace = {}
exec(open(problem).read(), namespace)
torch.manual_seed(0)
m = module.ModelNew().cuda()
args = [t.cuda() for t in namespace["get_inputs"]()]
torch.backends.cuda.matmul.allow_tf32 = False
with torch.no_grad():
    got = m(*args)
    full = eval(product, {"torch": torch, "m": m, "x": args[0], "y": args[-1]})
    if hasattr(m, "fc"):
        m.fc.weight.copy_(m.fc.weight.to(torch.bfloat16).float())
    rounded = [t.to(torch.bfloat16).float() for t in args]
    exact = eval(product, {"torch": torch, "m": m, "x": rounded[0], "y": rounded[-1]})
assert got.dtype == torch.float32 and got.shape == exact.shape, (got.dtype, got.shape)
torch.testing.assert_close(got, exact, rtol=1e-4, atol=1e-4)
assert (got - full).abs().max() > 1e-3, "the fp32 product"
print("ok")
"""


@pytest.mark.parametrize("cast", ["call", "tile"])
@pytest.mark.parametrize(("name", "forward", "inputs", "init", "product"), BF16_GEMMS,
                         ids=[g[0] for g in BF16_GEMMS])  # fmt: skip
def test_a_bf16_gemm_multiplies_bf16_operands_exactly_on_the_device(
    tmp_path: Path, name, forward, inputs, init, product, cast
):
    """Both operands rounded to bf16 (the weight once; A and an input B per call on the
    device, or each fp32 tile in the kernel: cast "tile"), products accumulated in fp32: what
    PyTorch computes from the same rounded operands in fp32, to accumulation order; not the
    fp32 product. (bf16 itself fails the evaluator's loose trials on plain GEMMs:
    test_triton's second distribution.)"""
    import dataclasses
    import os
    import subprocess
    import sys

    from kforge_search.agents.builtin.agent import seed_genome

    path = tmp_path / f"{name}.py"
    path.write_text(problem_source(forward, inputs, init))
    problem = load_problem(path)
    platform = get_platform("cuda-triton")
    agent = BuiltinAgent()
    seed = seed_genome(agent.plan(problem), platform, "loose")
    genome = dataclasses.replace(seed, precision="bf16", cast=cast)
    draft = agent.synthesize(problem, platform, genome, "t")
    per_call = "a0 = a0.to(torch.bfloat16) if a0.is_cuda else a0" in draft.source
    assert per_call == (cast == "call"), draft.source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(draft.source)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", BF16_CHECK, str(candidate), str(path), product],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr[-3000:]
