"""float16 and bfloat16 programs (issue 22, item 3): kernels that load in the program's dtype,
compute and accumulate in float32 (GEMMs: tiles of the dtype into a float32 accumulator) and
store the output in the dtype torch's reference has, verified under the policy's tolerances
for that dtype on the Triton interpreter and cpu-cpp. Our own small programs: models made
with .half() / .to(torch.bfloat16), inputs from torch.rand / torch.randn with a dtype, odd
sizes. Mixed programs follow torch's promotion where the kernels reproduce it exactly and are
refused with a reason where they cannot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kforge_search.agents.base import Context
from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze, relevant_genes, seed_genome
from kforge_search.agents.builtin.ir import Unsupported
from kforge_search.agents.builtin.ops import T_TO_BF16, TRITON_HELPERS
from kforge_search.evaluator import EvalConfig, Evaluator, Status
from kforge_search.evaluator.policy import get_policy
from kforge_search.platforms import get_platform
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import interpreted
from tests.agents.builtin.test_families_gpu import problem_source

AGENT = BuiltinAgent()
DTYPES = ("float16", "bfloat16")
CONVERT = {"float16": ".half()", "bfloat16": ".to(torch.bfloat16)"}
# (name, forward, inputs, init): DT is the dtype (torch.float16, ...), TO the model's
# conversion (.half() or .to(torch.bfloat16))
PROGRAMS = [
    ("gemm_relu", "return torch.relu(self.fc(x)) * 0.5", "[torch.randn(37, 67, dtype=DT)]",
     "self.fc = nn.Linear(67, 45)TO"),
    ("gemm_softmax", "return torch.softmax(self.fc(x), dim=1)", "[torch.rand(19, 83, dtype=DT)]",
     "self.fc = nn.Linear(83, 131)TO"),
    ("gemm_chain", "return self.fc2(torch.relu(self.fc1(x))) + 1.0",
     "[torch.randn(21, 45, dtype=DT)]",
     "self.fc1 = nn.Linear(45, 67)TO\nself.fc2 = nn.Linear(67, 29)TO"),
    ("gemm_layernorm", "return self.ln(self.fc(x))", "[torch.randn(11, 3, 50, dtype=DT)]",
     "self.fc = nn.Linear(50, 97)TO\nself.ln = nn.LayerNorm(97)TO"),
    ("bmm_scale", "return torch.bmm(x, y) * 0.25",
     "[torch.randn(3, 17, 33, dtype=DT), torch.rand(3, 33, 21, dtype=DT)]", ""),
    ("sdpa", "return F.scaled_dot_product_attention(x, y, z)",
     "[torch.randn(2, 3, 17, 16, dtype=DT) for _ in range(3)]", ""),
    ("gelu_chain", "return F.gelu(x) * torch.sigmoid(x) + 0.5",
     "[torch.randn(29, 301, dtype=DT)]", ""),
    ("softmax_rand", "return torch.softmax(x, dim=1)", "[torch.rand(13, 517, dtype=DT)]", ""),
    ("layernorm_3d", "return self.ln(x)", "[torch.randn(5, 7, 9, 13, dtype=DT)]",
     "self.ln = nn.LayerNorm((7, 9, 13))TO"),
    ("rmsnorm", "return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
     "[torch.randn(4, 16, 9, 11, dtype=DT)]", ""),
    ("batchnorm_train", "return torch.relu(self.bn(x))", "[torch.randn(6, 5, 7, 9, dtype=DT)]",
     "self.bn = nn.BatchNorm2d(5)TO"),
    ("sum_middle", "return x.sum(dim=1)", "[torch.randn(5, 31, 67, dtype=DT)]", ""),
    ("mean_max_all", "return x.mean() + x.amax()", "[torch.rand(5, 31, 67, dtype=DT)]", ""),
    ("argmax", "return torch.argmax(x, dim=-1)", "[torch.randn(33, 517, dtype=DT)]", ""),
    ("max_pool2d", "return F.max_pool2d(x, 3, stride=2, padding=1)",
     "[torch.randn(2, 3, 17, 19, dtype=DT)]", ""),
    ("cumsum", "return torch.cumsum(x, dim=-1)", "[torch.rand(7, 301, dtype=DT)]", ""),
    ("cross_entropy", "return F.cross_entropy(x, y)",
     "[torch.randn(23, 17, dtype=DT), torch.randint(0, 17, (23,))]", ""),
    # mixed: a low-precision input times a float32 parameter is float32 (torch's promotion):
    # the input converted exactly, a float32 output
    ("promoted", "return x * self.w + y", "[torch.randn(33, 65, dtype=DT), torch.rand(33, 65)]",
     "self.w = nn.Parameter(torch.randn(65))"),
]  # fmt: skip
CASES = [(dtype, *p) for dtype in DTYPES for p in PROGRAMS]
IDS = [f"{c[1]}-{c[0]}" for c in CASES]


def _problem(tmp_path: Path, dtype: str, name: str, forward: str, inputs: str, init: str):
    path = tmp_path / f"{name}_{dtype}.py"
    init = init.replace("TO", CONVERT[dtype])
    path.write_text(problem_source(forward, inputs.replace("DT", f"torch.{dtype}"), init))
    return load_problem(path)


def _out_dtype(problem) -> torch.dtype:
    """What torch's reference returns, run once at the problem's sizes."""
    from kforge_search.problem import exec_problem

    module = exec_problem(problem)
    torch.manual_seed(0)
    with torch.no_grad():
        return module.Model(*module.get_init_inputs())(*module.get_inputs()).dtype


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dtype_verifies_on_the_interpreter(verify, tmp_path, case):
    problem = _problem(tmp_path, *case)
    genome = TritonGenome(block_m=16, block_n=64, pass_block=64)  # several chunks per row
    draft = AGENT.synthesize(problem, get_platform("cpu-triton"), genome, "test")
    assert not hasattr(draft, "message"), draft
    result = verify(draft.source, problem)  # the output's dtype and its tolerances
    assert result.ok, result.message


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dtype_verifies_on_cpu_cpp(verify, tmp_path, case):
    problem = _problem(tmp_path, *case)
    draft = AGENT.synthesize(problem, get_platform("cpu-cpp"), CppGenome(), "test")
    assert not hasattr(draft, "message"), draft
    result = verify(draft.source, problem)
    assert result.ok, result.message


def test_outputs_keep_the_programs_dtype(tmp_path):
    """The cases above cover float16 / bfloat16 outputs, int64 indices and float32 ones."""
    dtypes = {c[1]: _out_dtype(_problem(tmp_path, *c)) for c in CASES if c[0] == "bfloat16"}
    assert dtypes["gemm_softmax"] == dtypes["sum_middle"] == torch.bfloat16
    assert dtypes["argmax"] == torch.int64
    assert dtypes["promoted"] == torch.float32


REFUSED = [
    # a float16 result promoted to float32: torch rounds x * 2 to float16 first
    ("rounded_then_promoted", "return (x * 2.0) + self.w", "[torch.randn(9, 33, dtype=DT)]",
     "self.w = nn.Parameter(torch.randn(33))", "unsupported: mixed dtypes"),
    # a 0-dim float32 parameter does not promote: torch rounds it to the input's dtype
    ("zero_dim_float32", "return x * self.s", "[torch.randn(9, 33, dtype=DT)]",
     "self.s = nn.Parameter(torch.tensor(1.1))", "unsupported: mixed dtypes"),
    ("float64", "return torch.relu(x)", "[torch.randn(9, 33, dtype=torch.float64)]", "",
     "unsupported: dtype (float64"),
]  # fmt: skip


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_the_kernels_cannot_reproduce_is_refused(tmp_path, case):
    name, forward, inputs, init, reason = case
    found = analyze(_problem(tmp_path, "float16", name, forward, inputs, init))
    assert isinstance(found, Unsupported)
    assert found.message.startswith(reason), found.message


def test_low_precision_gemms_take_their_dtype_dot(tmp_path):
    """The seed has no tf32 / three-dot scheme to choose (the dot is the dtype's), and a
    genome that names one still gets tiles of the dtype into a float32 accumulator; a GEMM
    whose A is a float32 value stored (attention's probabilities) is a float32 dot."""
    problem = _problem(tmp_path, "bfloat16", *PROGRAMS[5])  # sdpa: both kinds of GEMM
    plan = analyze(problem)
    assert not isinstance(plan, Unsupported)
    platform = get_platform("cuda-triton")
    seed = seed_genome(plan, platform, "strict")
    assert seed.precision == "ieee"
    assert not {"precision", "x3", "promote"} & relevant_genes(plan, seed)
    genome = TritonGenome(precision="bf16x3", x3="presplit")
    source = AGENT.synthesize(problem, platform, genome, "test").source
    assert "acc = tl.dot(a, b, acc)\n" in source  # Q K^T: bfloat16 tiles
    assert 'acc = tl.dot(a, b, acc, input_precision="tf32x3")' in source  # P V
    assert "_kf_pair" not in source and "a_hi" not in source


def test_bfloat16_stores_round_to_nearest_even(tmp_path):
    """_kf_to_bf16 (the bfloat16 outputs' store) rounds as torch does, ties to even, on the
    interpreter (whose plain cast truncates): values at and around every halfway point."""
    source = (
        "import triton\nimport triton.language as tl\n\n\n"
        + TRITON_HELPERS[T_TO_BF16]
        + "\n\n@triton.jit\ndef _kf_round(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    x = tl.load(x_ptr + i, mask=i < n)\n"
        f"    tl.store(y_ptr + i, {T_TO_BF16}(x), mask=i < n)\n"
    )
    path = tmp_path / "round_bf16.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("kf_round_bf16", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with interpreted():
        spec.loader.exec_module(module)
    torch.manual_seed(0)
    base = (torch.randn(2048) * torch.exp(torch.randn(2048) * 4)).to(torch.bfloat16)
    bits = base.view(torch.int16).to(torch.int32)
    halfway = ((bits << 16) + 0x8000).to(torch.int32).view(torch.float32)  # exact ties
    edges = torch.tensor([0.0, -0.0, 3.3895314e38, float("inf"), float("-inf")])
    x = torch.cat([halfway, halfway.nextafter(halfway * 2), halfway.nextafter(halfway * 0), edges])
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    module._kf_round[(-(-x.numel() // 1024),)](x, y, x.numel(), BLOCK=1024)
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(EvalConfig(baselines=()))


@pytest.mark.parametrize(
    ("platform", "dtype", "index"), [("cpu-cpp", "float16", 1), ("cpu-triton", "bfloat16", 6)]
)
def test_the_evaluator_verifies_and_records_the_dtypes_tolerance(
    evaluator, tmp_path, platform, dtype, index
):
    problem = _problem(tmp_path, dtype, *PROGRAMS[index])
    plat = get_platform(platform)
    (draft,) = AGENT.propose(Context(problem, plat))
    result = evaluator.evaluate_source(draft.source, problem, plat)
    assert result.status is Status.OK, result.message
    c = result.correctness
    assert c.trials_passed == c.trials_run >= 7
    assert c.dtype == dtype
    assert (c.atol, c.rtol) == get_policy("strict").tolerance(dtype)


@pytest.mark.parametrize(("dtype", "index"), [("float16", 1), ("bfloat16", 5)])
def test_low_precision_kernels_compile_for_sm90_with_wgmma(tmp_path, dtype, index):
    """What the interpreter cannot show: the dtype's tiles into tensor cores (and attention's
    float32 P V as tf32x3), the bfloat16 store's rounding, compiled for an H100."""
    from tests.agents.builtin.test_gpu_compile import compile_for_h100

    report = compile_for_h100(_problem(tmp_path, dtype, *PROGRAMS[index]), "strict", tmp_path,
                              dtype=dtype)  # fmt: skip
    assert "_kf_s0_gemm: ok (wgmma" in report, report
