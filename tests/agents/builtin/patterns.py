"""Small problems, one pattern each, beyond the bundled level2 suite (odd sizes on purpose)."""

from __future__ import annotations

import textwrap

from kforge_search.problem import Problem, parse_problem

_TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, {params}):
        super().__init__()
{init}

    def forward(self, {args}):
{forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return {init_inputs}
"""


def make(
    name: str,
    forward: str,
    init: str = "self.linear = nn.Linear(in_f, out_f)",
    inputs: str = "[torch.randn(12, 40)]",
    init_inputs: str = "[40, 25]",
    params: str = "in_f, out_f",
    args: str = "x",
) -> Problem:
    source = _TEMPLATE.format(
        params=params,
        init=textwrap.indent(textwrap.dedent(init).strip(), " " * 8),
        args=args,
        forward=textwrap.indent(textwrap.dedent(forward).strip(), " " * 8),
        inputs=inputs,
        init_inputs=init_inputs,
    )
    return parse_problem(source, f"<pattern {name}>", f"patterns/{name}")


SUPPORTED = {
    "silu_tanh_gelu": make("silu_tanh_gelu",
                           "return F.gelu(F.silu(self.linear(x)), approximate='tanh')"),
    "elementwise_zoo": make("elementwise_zoo", """
        y = self.linear(x)
        y = F.hardtanh(y, -0.5, 0.5) + torch.tanh(y) - F.leaky_relu(y, 0.2) * F.mish(y)
        y = torch.clamp(y, min=-0.3) + torch.clamp_max(y, 0.9) + F.relu6(y * 8.0)
        return F.elu(y) / 3.0 + F.softplus(y) - torch.sigmoid(y) + F.hardswish(y) + y ** 2
    """),
    "vector_ops": make("vector_ops",
                       "y = self.linear(x)\nreturn (y - self.a) * self.a + y / self.b",
                       init="self.linear = nn.Linear(in_f, out_f)\n"
                            "self.a = nn.Parameter(torch.randn(out_f) * 0.1)\n"
                            "self.b = nn.Parameter(torch.rand(1, out_f) + 1.0)"),
    "matmul_param": make("matmul_param", "return torch.relu(torch.matmul(x, self.w)) - 0.25",
                         init="self.w = nn.Parameter(torch.randn(in_f, out_f) * 0.1)"),
    "weight_t": make("weight_t", "return x @ self.linear.weight.t() + self.linear.bias"),
    # a GEMM, then statistics over all of it: a mean of everything, and x / ||x||
    "global_mean": make("global_mean", "return torch.relu(self.linear(x)).mean()"),
    "frobenius": make("frobenius", "y = self.linear(x)\nreturn y / torch.norm(y, p='fro')"),
    "no_bias_3d": make("no_bias_3d", "return torch.sigmoid(self.linear(x)).sum(dim=-1)",
                       init="self.linear = nn.Linear(in_f, out_f, bias=False)",
                       inputs="[torch.randn(3, 5, 40)]"),
    "bmm_inputs": make("bmm_inputs", "return torch.tanh(torch.bmm(x, y)) * 2.0",
                       init="self.scale = 2.0", params="", args="x, y", init_inputs="[]",
                       inputs="[torch.randn(3, 10, 20), torch.randn(3, 20, 14)]"),
    "row_stats": make("row_stats", """
        y = self.linear(x)
        a = y.amax(dim=1, keepdim=True) - y.mean(dim=-1, keepdim=True)
        return a + torch.min(y, 1, keepdim=True)[0] + torch.logsumexp(y, 1, keepdim=True)
    """),
    "sum_no_keepdim": make("sum_no_keepdim", "return torch.sum(self.linear(x), dim=1) * 0.5"),
    "log_softmax": make("log_softmax", "return torch.log_softmax(self.linear(x), dim=-1) * 0.5"),
    "minus_row_max": make("minus_row_max",
                          "y = self.linear(x)\nreturn y - y.max(dim=1, keepdim=True).values"),
    "manual_norm": make("manual_norm", """
        y = self.linear(x)
        centered = y - y.mean(1, keepdim=True)
        scale = torch.sqrt(y.var(1, keepdim=True, unbiased=False) + 1e-5)
        return centered / scale + y.std(1, keepdim=True)
    """),
    "mean_size1": make("mean_size1", """
        y = self.linear(x).sum(1, keepdim=True)
        return torch.mean(y, dim=1, keepdim=True) + torch.logsumexp(y, dim=1, keepdim=True)
    """),
    "layernorm_plain": make("layernorm_plain", "return torch.relu(self.norm(self.linear(x)))",
                            init="self.linear = nn.Linear(in_f, out_f)\n"
                                 "self.norm = nn.LayerNorm(out_f, elementwise_affine=False)"),
    "group_norm_f": make("group_norm_f", "return F.group_norm(self.linear(x), 4) * 2.0",
                         init_inputs="[40, 24]"),
    "instance_norm_view": make("instance_norm_view", """
        y = self.linear(x)
        n = y.shape[0]
        return self.norm(y.view(n, self.channels, -1)).view(n, -1) + 1.0
    """, init="self.linear = nn.Linear(in_f, out_f)\nself.channels = 4\n"
              "self.norm = nn.InstanceNorm1d(4)", init_inputs="[40, 24]"),
    "batchnorm_eval": make("batchnorm_eval", "return torch.tanh(self.bn(self.linear(x)))",
                           init="self.linear = nn.Linear(in_f, out_f)\n"
                                "self.bn = nn.BatchNorm1d(out_f)\nself.bn.eval()"),
    "maxpool3": make("maxpool3", "return F.max_pool1d(self.linear(x).unsqueeze(1), 3).squeeze(1)"),
    "avgpool_softmax": make("avgpool_softmax", """
        y = F.avg_pool1d(self.linear(x).unsqueeze(1), 2).squeeze(1)
        return torch.softmax(y, dim=1)
    """, init_inputs="[40, 26]"),
    "residual_row_input": make("residual_row_input", "return torch.relu(self.linear(x) + r) * s",
                               args="x, r, s",
                               inputs="[torch.randn(12, 40), torch.randn(12, 25), "
                                      "torch.randn(12, 1)]"),
    "mlp_hidden_residual": make("mlp_hidden_residual", """
        h = torch.relu(self.fc1(x))
        return self.fc2(h) + h
    """, init="self.fc1 = nn.Linear(in_f, out_f)\nself.fc2 = nn.Linear(out_f, out_f)"),
    "three_gemms_norm": make("three_gemms_norm", """
        h = torch.relu(self.norm(self.fc1(x)))
        return self.fc3(torch.tanh(self.fc2(h)))
    """, init="self.fc1 = nn.Linear(in_f, out_f)\nself.norm = nn.LayerNorm(out_f)\n"
              "self.fc2 = nn.Linear(out_f, 17)\nself.fc3 = nn.Linear(17, 9)"),
    "dropout_identity": make("dropout_identity", "return self.drop(F.silu(self.linear(x)))",
                             init="self.linear = nn.Linear(in_f, out_f)\n"
                                  "self.drop = nn.Dropout(0.0)"),
    # issue 19: broadcasting against statistics, images, training mode, rewrites
    "row_mean_times_input": make("row_mean_times_input",
                                 "return torch.relu(self.linear(x).mean(dim=1, keepdim=True) * z)",
                                 args="x, z",
                                 inputs="[torch.rand(12, 40), torch.rand(12, 25)]"),
    "param4d_vs_row_min": make("param4d_vs_row_min", """
        m = torch.min(self.linear(x), dim=1, keepdim=True)[0]
        return torch.tanh(m + self.b)
    """, init="self.linear = nn.Linear(in_f, out_f)\n"
              "self.b = nn.Parameter(torch.randn(1, out_f, 1, 1))"),
    "col_mean_no_keepdim": make("col_mean_no_keepdim",
                                "y = self.linear(x)\nreturn y / (y.abs().mean(0) + 1.0)"),
    "instance_norm2d_lifted": make("instance_norm2d_lifted", """
        y = self.linear(x)
        return F.gelu(self.norm(y.unsqueeze(1).unsqueeze(1)).flatten(1))
    """, init="self.linear = nn.Linear(in_f, out_f)\nself.norm = nn.InstanceNorm2d(1)",
         inputs="[torch.rand(12, 40)]"),
    "image_mean_keepdim": make("image_mean_keepdim", """
        y = self.linear(x).view(-1, 3, 2, 4)
        y = self.norm(y) * self.w
        return y.reshape(y.shape[0], -1)
    """, init="self.linear = nn.Linear(in_f, 24)\nself.norm = nn.InstanceNorm2d(3, affine=True)\n"
              "self.w = nn.Parameter(torch.rand(3, 1, 1) + 0.5)"),
    "batchnorm_log_softmax": make("batchnorm_log_softmax",
                                  "return torch.log_softmax(self.bn(self.linear(x)), dim=1)",
                                  init="self.linear = nn.Linear(in_f, out_f)\n"
                                       "self.bn = nn.BatchNorm1d(out_f, momentum=None)"),
    "dropout_functional": make("dropout_functional",
                               "return torch.relu(F.dropout(self.linear(x), 0.3)) + 1.0"),
    "gemm_scaled_sum": make("gemm_scaled_sum",
                            "return (self.linear(x) * 0.5 - self.c).sum(dim=1, keepdim=True)",
                            init="self.linear = nn.Linear(in_f, out_f)\n"
                                 "self.c = nn.Parameter(torch.rand(out_f))",
                            inputs="[torch.rand(12, 40)]"),
    "dropout_mean_softmax": make("dropout_mean_softmax", """
        y = F.dropout(self.linear(x), 0.2, training=self.training).mean(dim=1, keepdim=True)
        return torch.softmax(y, dim=1) + y
    """),
    "instance_norm_mismatched_features": make("instance_norm_mismatched_features", """
        y = self.norm(self.linear(x).unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)
        return (y + z) * z
    """, init="self.linear = nn.Linear(in_f, out_f)\nself.norm = nn.InstanceNorm2d(out_f)",
         args="x, z", inputs="[torch.randn(12, 40), torch.randn(12, 25)]"),
    "batch_logsumexp": make("batch_logsumexp",
                            "return torch.logsumexp(self.linear(x).sum(dim=1), dim=0)"),
}  # fmt: skip

UNSUPPORTED = {
    "conv": (make("conv", "return self.conv(x)", init="self.conv = nn.Conv1d(4, 4, 3)",
                  inputs="[torch.randn(2, 4, 10)]", init_inputs="[]", params=""),
             "unsupported: module Conv1d"),
    "computes_nothing": (make("computes_nothing", "return x.contiguous()", init="self.k = 1",
                              init_inputs="[]", params=""),
                         "unsupported: a program that computes nothing"),
    "cumsum": (make("cumsum", "return torch.cumsum(self.linear(x), dim=0)"), "unsupported: cumsum"),
    "two_outputs": (make("two_outputs", "y = self.linear(x)\nreturn y, y"),
                    "unsupported: multiple outputs"),
    "dropout_after_pool": (make("dropout_after_pool", """
        y = F.max_pool1d(self.linear(x).unsqueeze(1), 2).squeeze(1)
        return F.dropout(y, 0.5)
    """), "unsupported: dropout in training mode"),
    "columns_after_batch_stat": (make("columns_after_batch_stat", """
        y = self.linear(x)
        return y - y.sum(dim=1, keepdim=True).mean(dim=0, keepdim=True)
    """), "unsupported: a value over the GEMM's columns after a statistic over the rows"),
    "instance_norm_running": (make("instance_norm_running", """
        y = self.linear(x)
        return self.norm(y.view(y.shape[0], 5, 5)).flatten(1)
    """, init="self.linear = nn.Linear(in_f, out_f)\n"
              "self.norm = nn.InstanceNorm1d(5, track_running_stats=True)"),
        "unsupported: InstanceNorm1d (with running statistics)"),
    "where": (make("where", "y = self.linear(x)\nreturn torch.where(y > 0, y, 0.0)"),
              "unsupported: gt"),
    "float64": (make("float64", "return self.linear(x)", inputs="[torch.randn(4, 40).double()]",
                     init="self.linear = nn.Linear(in_f, out_f).double()"), "unsupported: dtype"),
    "median": (make("median", "return torch.median(self.linear(x), dim=1).values"),
               "unsupported: median"),
    # [C, H, W] columns: a parameter over H only, an input over (N, C) only
    "inner_columns_gap": (make("inner_columns_gap", "return self.ln(x) + self.p",
                               init="self.ln = nn.LayerNorm((5, 7, 9))\n"
                                    "self.p = nn.Parameter(torch.randn(1, 7, 1))",
                               inputs="[torch.randn(3, 5, 7, 9)]", init_inputs="[]", params=""),
                          "unsupported: broadcast (self.p with dims (1, 'C1', 1)"),
    "inner_columns_matrix": (make("inner_columns_matrix", "return self.ln(x) * y", args="x, y",
                                  init="self.ln = nn.LayerNorm((5, 7, 9))",
                                  inputs="[torch.randn(3, 5, 7, 9), torch.randn(3, 5, 1, 1)]",
                                  init_inputs="[]", params=""),
                             "unsupported: broadcast (y with dims ('L0', 'C', 1, 1)"),
}  # fmt: skip
