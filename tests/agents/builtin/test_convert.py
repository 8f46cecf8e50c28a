"""Tracing and recognition: which ops each problem becomes, and clean refusals."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import BuiltinAgent, CppGenome, TritonGenome
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Ew, Kind, Load, Scalar, Stat, Unsupported
from kforge_search.agents.builtin.plan import Plan
from kforge_search.agents.builtin.render import output_line
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems, load_problem, resolve_problem
from tests.agents.builtin.patterns import SUPPORTED, UNSUPPORTED
from tests.conftest import PROBLEMS

LEVEL2, _ = find_problems(PROBLEMS / "level2")


def plan_of(name: str, sizes: str = "ci") -> Plan:
    plan = analyze(resolve_problem(name, size_set=sizes))
    assert isinstance(plan, Plan), plan
    return plan


@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_every_level2_problem_is_recognized(problem):
    plan = analyze(problem.resized("ci"))
    assert isinstance(plan, Plan), plan.message
    assert plan.graph.ops()[0] == "gemm"


def test_ops_of_a_gemm_with_epilogue():
    assert plan_of("level2/02_gemm_gelu_scale").graph.ops() == ("gemm", "add", "gelu", "mul")


def test_scalars_are_read_from_the_model_at_run_time():
    graph = plan_of("level2/08_gemm_sub_tanh_mul").graph
    sources = {
        a.source for n in graph.nodes for a in getattr(n, "args", ()) if isinstance(a, Scalar)
    }
    assert sources == {"self.subtract_value", "self.multiply_value"}


def test_softmax_is_two_row_statistics_in_one_pass():
    (stage,) = plan_of("level2/13_gemm_softmax").stages
    assert stage.axis == "row" and not stage.segmented and stage.fusable
    assert [graph_op for graph_op in plan_of("level2/13_gemm_softmax").graph.ops()].count(
        "row_max"
    ) == 1


def test_group_norm_statistics_run_per_segment():
    plan = plan_of("level2/17_gemm_groupnorm_swish")
    assert plan.graph.groups == Scalar(5.0, "self.norm.num_groups")
    assert plan.stages[0].segmented and not plan.stages[0].fusable


def test_group_norm_of_an_image_runs_per_segment_with_per_channel_weights(tmp_path):
    path = tmp_path / "group_norm_4d.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.gn = nn.GroupNorm(3, 6)\n\n"
        "    def forward(self, x):\n        return self.gn(x)\n\n"
        "def get_inputs():\n    return [torch.randn(4, 6, 5, 7)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    plan = analyze(load_problem(path))
    assert isinstance(plan, Plan), plan
    graph = plan.graph
    assert graph.groups == Scalar(3.0, "self.gn.num_groups") and plan.stages[0].segmented
    assert graph.out_dims == ("L0", "C", "C1", "C2")  # the columns: channels and pixels
    loads = {n.tensor: (n.kind, n.inner) for n in graph.nodes if isinstance(n, Load)}
    # per channel: column // (H * W)
    assert loads == {"self.gn.weight": (Kind.COL, 2), "self.gn.bias": (Kind.COL, 2)}


def test_instance_norm_segments_come_from_the_view():
    plan = plan_of("level2/19_gemm_instancenorm_tanh")
    assert plan.graph.groups == Scalar(8.0, "self.num_channels")
    kinds = {n.kind for n in plan.graph.nodes}
    assert Kind.SEGVEC in kinds  # the affine weight is per channel


def test_batch_norm_in_training_uses_column_statistics():
    assert plan_of("level2/18_gemm_batchnorm_gelu").stages[0].axis == "col"


def test_pooling_reads_its_size_from_the_module():
    pool = plan_of("level2/15_gemm_avgpool_gelu").stages[0].pool
    assert pool is not None and pool.k == Scalar(8.0, "self.pool.kernel_size[0]")


def test_two_gemms_make_two_stages_and_the_hidden_layer_is_stored():
    plan = plan_of("level2/22_mlp_ffn_gelu_residual")
    assert len(plan.stages) == 2
    first, second = plan.stages
    assert second.gemm.a in first.outs


def test_mean_over_a_size_one_dim_is_simplified_away():
    plan = analyze(SUPPORTED["mean_size1"])
    assert isinstance(plan, Plan)
    assert plan.graph.ops().count("row_sum") == 1  # the sum; mean and logsumexp over 1 vanish


def test_work_counts_gemm_flops_at_the_traced_sizes():
    work = plan_of("level2/01_gemm_bias_relu", "default").graph.work
    assert work.gemms == ((1, 1024, 8192, 8192),)
    assert work.gemm_flops == 2 * 1024 * 8192 * 8192
    assert work.min_bytes == 4 * (1024 * 8192 + 8192 * 8192 + 8192 + 1024 * 8192)


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_patterns_are_recognized(name):
    plan = analyze(SUPPORTED[name])
    assert isinstance(plan, Plan), plan.message


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_patterns_say_what(name):
    problem, expected = UNSUPPORTED[name]
    plan = analyze(problem)
    assert isinstance(plan, Unsupported)
    assert plan.message.startswith(expected), plan.message
    support = BuiltinAgent().supports(problem, get_platform("cpu-triton"))
    assert not support.ok and support.reason == plan.message


def test_platforms_without_a_backend_are_refused_by_name():
    support = BuiltinAgent().supports(
        resolve_problem("level2/01_gemm_bias_relu"), get_platform("cuda-cpp")
    )
    assert not support.ok and support.reason.startswith("unsupported: platform cuda-cpp")


@pytest.mark.parametrize("problem", LEVEL2, ids=lambda p: p.name)
def test_tail_work_is_a_few_operations_per_gemm_output(problem):
    """The roofline's work: a tail op touches each GEMM output a few times, never more (a
    segment view once counted the GroupNorm tail 32768 times and put a kernel above 100%)."""
    work = analyze(problem).graph.work
    outputs = max(b * m * n for b, m, n, _ in work.gemms)
    assert 1 <= work.tail_ops / outputs <= 18  # BatchNorm, LayerNorm and GELU: 16
    assert work.min_bytes < 4 * 4 * work.gemm_flops  # inputs + parameters + output, once


# -- issue 19: KernelBench's GEMM + tail chains -------------------------------------------------
def test_a_gemm_summed_over_its_outputs_becomes_a_gemv_named_in_the_note():
    plan = plan_of("level2/29_gemm_sum_offset")
    assert plan.graph.rewrites == ("gemm_sum_as_gemv",)
    assert [n for _, _, n, _ in plan.graph.work.gemms] == [1]  # one output column
    assert "_kf_sum_n" in plan.graph.gemms[0].b and "self.linear.weight" in plan.graph.gemms[0].b
    problem = resolve_problem("level2/29_gemm_sum_offset", size_set="ci")
    draft = BuiltinAgent().synthesize(problem, get_platform("cpu-triton"), TritonGenome(), "seed")
    assert "x @ W.sum(0)" in draft.note and "x @ W.sum(0)" in draft.source
    mean = plan_of("level2/10_gemm_mean_gelu")  # the mean's count is read from the weight
    sizes = [a for n in mean.graph.nodes if isinstance(n, Ew) for a in n.args]
    assert Scalar(79.0, "self.linear.weight.shape[0]") in sizes


def test_the_gemm_stays_when_its_columns_are_still_needed():
    plan = plan_of("level2/26_gemm_subtract_mean_gelu_input_residual")  # mean + the input
    assert plan.graph.rewrites == () and plan.graph.work.gemms[0][2] == 35


def test_a_row_statistic_broadcasts_against_inputs_and_4d_parameters():
    gated = plan_of("level2/28_gemm_rowmax_gate_param4d")
    assert gated.graph.out_dims == ("L0", "C", 1, 1)
    permuted = plan_of("level2/27_gemm_min_bias4d_tanh")  # (B, 1) + (1, N, 1, 1)
    assert permuted.graph.out_dims == (1, "C", "L0", 1)
    assert ".permute(1, 0)" in output_line(permuted)
    residual = plan_of("level2/26_gemm_subtract_mean_gelu_input_residual")
    loads = {n.tensor: n.kind for n in residual.graph.nodes if isinstance(n, Load)}
    assert loads["x"] is Kind.MAT  # the (B, N) input against the (B, 1) mean


def test_instance_norm_of_an_image_view_runs_per_channel_segment():
    plan = plan_of("level2/23_gemm_instancenorm2d_residual_mul")
    assert plan.graph.groups == Scalar(3.0, "self.shape[0]")
    assert plan.stages[0].segmented
    lifted = plan_of("level2/25_gemm_unsqueeze_instancenorm_tanh")  # one channel: whole rows
    assert lifted.graph.groups is None and lifted.stages[0].axis == "row"


def test_training_batchnorm_then_softmax_runs_columns_then_rows():
    stage = plan_of("level2/31_gemm_batchnorm_softmax_scale").stages[0]
    graph = plan_of("level2/31_gemm_batchnorm_softmax_scale").graph
    assert stage.col_tail and stage.col_outs and not stage.fusable
    assert {graph.node(n).axis for n in stage.col_tail if isinstance(graph.node(n), Stat)} == {
        "col"
    }
    assert {graph.node(n).axis for n in stage.tail if isinstance(graph.node(n), Stat)} == {"row"}
    targets = [u.target for u in graph.updates]
    assert targets == [
        "self.bn.running_mean",
        "self.bn.running_var",
        "self.bn.num_batches_tracked",
    ]


def test_statistics_over_the_batch_of_row_results_run_last():
    plan = plan_of("level2/39_gemm_relu_rowmax_logsumexp")
    stage = plan.stages[0]
    assert stage.post_tail and plan.graph.out_dims == () and plan.graph.output in stage.post_outs


def test_training_dropout_draws_its_mask_in_forward():
    problem = resolve_problem("level2/35_gemm_dropout_gelu_scale", size_set="ci")
    for platform, genome in (("cpu-triton", TritonGenome()), ("cpu-cpp", CppGenome())):
        source = BuiltinAgent().synthesize(problem, get_platform(platform), genome, "t").source
        assert "_kf_dropout_mask((lead[0], self.linear.weight.shape[-2],), self.dropout.p" in source
        assert "bernoulli_(1.0 - p)" in source and "native_dropout" in source
