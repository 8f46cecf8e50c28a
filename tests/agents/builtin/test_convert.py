"""Tracing and recognition: which ops each problem becomes, and clean refusals."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import BuiltinAgent
from kforge_search.agents.builtin.agent import analyze
from kforge_search.agents.builtin.ir import Kind, Scalar, Unsupported
from kforge_search.agents.builtin.plan import Plan
from kforge_search.platforms import get_platform
from kforge_search.problem import find_problems, resolve_problem
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
    assert 1 <= work.tail_ops / outputs <= 12
    assert work.min_bytes < 4 * 4 * work.gemm_flops  # inputs + parameters + output, once
