"""Non-contiguous inputs for the operator families of issue 22 (views a user's program hands
the model: transposes, permutes, strided slices, expands), from torch.rand and torch.randn at
odd sizes, on Triton's interpreter and cpu-cpp. A kernel that indexes its input as if it were
contiguous reads the wrong elements; the verifier's trials call the model with the same kind
of view get_inputs makes."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import CppGenome, TritonGenome
from kforge_search.problem import load_problem
from tests.agents.builtin.harness import assert_draft_verifies
from tests.agents.builtin.test_families_gpu import problem_source

# (name, forward, inputs with {r} for the generator): each input a view that is not contiguous
CASES = [
    ("argmax_permuted", "return torch.argmax(x, dim=1)", "[torch.{r}(5, 37, 29).permute(0, 2, 1)]"),
    ("cumsum_transposed", "return torch.cumsum(x, dim=1)", "[torch.{r}(131, 23).t()]"),
    ("layernorm_strided", "return F.layer_norm(x, (131,))", "[torch.{r}(17, 262)[:, ::2]]"),
    ("maxpool1d_transposed", "return F.max_pool1d(x, 4, 2, 1)",
     "[torch.{r}(3, 301, 5).transpose(1, 2)]"),
    ("mse_permuted", "return F.mse_loss(x, y)",
     "[torch.{r}(7, 33, 19).permute(2, 0, 1), torch.{r}(19, 7, 33)]"),
    ("sum_channels_last", "return torch.sum(x, dim=1)",
     "[torch.{r}(3, 9, 11, 7).permute(0, 3, 1, 2)]"),
    ("rms_channels_last", "return x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5)",
     "[torch.{r}(2, 11, 13, 7).permute(0, 3, 1, 2)]"),
    ("matmul_transposed_view", "return torch.matmul(x, y)",
     "[torch.{r}(67, 45).t(), torch.{r}(67, 29)]"),
    ("softmax_strided_rows", "return torch.softmax(x, dim=0)", "[torch.{r}(37, 129)[::2]]"),
    ("relu_expanded", "return torch.relu(x) + y",
     "[torch.{r}(1, 33).expand(19, 33), torch.{r}(19, 33)]"),
]  # fmt: skip


def _problem(tmp_path, case, gen):
    name, forward, inputs = case
    path = tmp_path / f"{name}_{gen}.py"
    path.write_text(problem_source(forward, inputs.format(r=gen)))
    return load_problem(path)


@pytest.mark.parametrize("gen", ["rand", "randn"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_view_verifies_on_the_interpreter(verify, tmp_path, case, gen):
    genome = TritonGenome(block_m=16, block_n=64, pass_block=64)  # several chunks per row
    assert_draft_verifies(verify, _problem(tmp_path, case, gen), "cpu-triton", genome)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_view_verifies_on_cpu_cpp(verify, tmp_path, case):
    assert_draft_verifies(verify, _problem(tmp_path, case, "randn"), "cpu-cpp", CppGenome())
