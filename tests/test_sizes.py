"""Size sets derived for problems written as KernelBench publishes them: ci small and
runnable with the file's structure kept (kernels, group counts, divisibility, ratios),
unseen odd; the problems of tests/fixtures/as_published run at both."""

from __future__ import annotations

import ast
import math
import time

import pytest
import torch

from kforge_search.problem import exec_problem, load_problem, parse_problem
from kforge_search.sizes import INPUT_BUDGET, input_elements
from tests.conftest import ROOT

AS_PUBLISHED = sorted((ROOT / "tests" / "fixtures" / "as_published").glob("*.py"))

TEMPLATE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self{params}):
        super(Model, self).__init__()
{init}
    def forward(self, x):
        return {body}

{constants}

def get_inputs():
    return [torch.rand({shape})]

def get_init_inputs():
    return [{init_inputs}]
"""


def sets_of(source: str) -> dict[str, dict]:
    problem = parse_problem(source, "p.py", "p")
    return {name: dict(values) for name, values in problem.size_sets}


def problem_source(constants: str, shape: str, body: str = "x * 2", **parts: str) -> str:
    fields = {"params": "", "init": "        pass", "init_inputs": "", **parts}
    return TEMPLATE.format(constants=constants, shape=shape, body=body, **fields)


def run(problem) -> torch.Tensor:
    module = exec_problem(problem)
    torch.manual_seed(0)
    with torch.no_grad():
        return module.Model(*module.get_init_inputs())(*module.get_inputs())


@pytest.mark.parametrize("size_set", ["ci", "unseen"])
@pytest.mark.parametrize("path", AS_PUBLISHED, ids=lambda p: p.stem)
def test_published_style_problems_run_at_derived_sizes(path, size_set):
    problem = load_problem(path, size_set=size_set)
    assert problem.overrides, "a problem at published sizes must get smaller ones"
    start = time.perf_counter()
    out = run(problem)
    assert time.perf_counter() - start < 2.0
    assert out.numel() > 0 and torch.isfinite(out).all()
    if size_set == "ci":
        defaults = dict(problem.constants)
        assert all(v <= defaults[k] for k, v in problem.overrides if isinstance(v, int))
        assert input_elements(ast.parse(problem.source), dict(problem.overrides)) <= INPUT_BUDGET


def test_ci_keeps_kernels_group_counts_squares_and_computed_shapes():
    path = next(p for p in AS_PUBLISHED if p.stem == "conv_groupnorm_bias")
    problem = load_problem(path, size_set="ci")
    sizes = problem.sizes
    assert sizes["kernel_size"] == 3 and sizes["num_groups"] == 12
    assert sizes["out_channels"] % 12 == 0 and sizes["height"] == sizes["width"]
    assert 2 <= sizes["batch_size"] < 64
    namespace: dict = {}
    exec(problem.program(), namespace)
    assert namespace["bias_shape"] == (sizes["out_channels"], 1, 1)  # follows out_channels


@pytest.mark.parametrize("size_set", ["ci", "unseen"])
def test_divisibility_and_reassigned_constants_hold(size_set):
    path = next(p for p in AS_PUBLISHED if p.stem == "blocked_attention")
    sizes = load_problem(path, size_set=size_set).sizes
    assert sizes["seq_length"] % sizes["block_len"] == 0
    assert sizes["embed_dim"] % sizes["num_heads"] == 0
    assert sizes["seq_length"] < 512  # the binding in force (512, not 256) was scaled


def test_unseen_sizes_are_odd_and_ratios_stay():
    sets = sets_of(problem_source("batch_size = 4096\ndim = 393216", "batch_size, dim"))
    assert all(v % 2 == 1 for v in sets["unseen"].values()), sets
    assert all(sets["unseen"][k] > v for k, v in sets["ci"].items()), sets
    path = next(p for p in AS_PUBLISHED if p.stem == "scaled_matmul")
    unseen = load_problem(path, size_set="unseen").sizes
    assert unseen["M"] % 2 == 1 and unseen["K"] == 4 * unseen["M"]  # K = 4 M as published


def test_ci_brings_inputs_under_the_budget_and_keeps_counts():
    source = problem_source(
        "batch_size = 128\ndim1 = 4096\ndim2 = 4095\nreduce_dim = 1\nnum_layers = 6\nscale = 0.5",
        "batch_size, dim1, dim2",
    )
    ci = sets_of(source)["ci"]
    assert set(ci) == {"batch_size", "dim1", "dim2"}
    assert ci["batch_size"] * ci["dim1"] * ci["dim2"] <= INPUT_BUDGET
    assert ci["dim1"] > ci["dim2"] or ci["dim1"] == ci["dim2"]  # order kept


@pytest.mark.parametrize(
    ("constants", "least"),
    [
        ("kernel_size = 11\nheight = width = 2048", 11),
        ("kernel_size = 8\ndilation = 3\nheight = width = 65536", 22),
        ("kernel_size = (5, 9)\ndilation = (2, 3)\nheight = width = 512", 25),
    ],
)
def test_sizes_stay_above_the_kernel_window(constants, least):
    # 512 channels written in the draw: the budget alone would take height and width to 4
    shape = "batch_size, 512, height, width"
    ci = sets_of(problem_source(f"batch_size = 16\n{constants}", shape))["ci"]
    assert least <= ci["height"] <= 2 * least and ci["width"] == ci["height"]


def test_a_size_the_model_hard_codes_is_kept():
    source = problem_source(
        "batch_size = 10\nimage_size = 224",
        "batch_size, 3, image_size, image_size",
        params=", img_size=224",
    )
    assert sets_of(source)["ci"] == {"batch_size": 2}


def test_a_fixed_global_pool_keeps_the_spatial_sizes():
    source = problem_source(
        "batch_size = 10\nchannels = 64\nheight = 224\nwidth = 224",
        "batch_size, channels, height, width",
        body="nn.AvgPool2d(7)(x)",
    )
    ci = sets_of(source)["ci"]
    assert "height" not in ci and "width" not in ci and ci["batch_size"] == 2


def test_a_group_count_given_as_parameter_default_divides():
    source = problem_source(
        "batch_size = 1024\nout_channels = 16\nside = 64",
        "batch_size, out_channels, side, side",
        params=", channels, num_groups=4",
        init_inputs="out_channels",
    )
    sets = sets_of(source)
    assert sets["ci"]["out_channels"] % 4 == 0 and sets["unseen"]["out_channels"] % 4 == 0


def test_skip_connections_keep_their_factors_of_two_at_unseen():
    body = "torch.cat([x, nn.ConvTranspose2d(3, 3, 2, stride=2)(x[..., ::2, ::2])], 1)"
    source = problem_source(
        "batch_size = 8\nheight = 64\nwidth = 512", "batch_size, 3, height, width", body=body
    )
    sets = sets_of(source)
    for name in ("height", "width"):
        ci, unseen = sets["ci"][name], sets["unseen"].get(name, sets["ci"][name])
        assert unseen % (ci & -ci) == 0, sets


def test_given_size_sets_win_and_a_missing_unseen_is_derived_from_the_given_ci():
    constants = "batch_size = 4096\ndim = 16384"
    both = constants + "\nKFORGE_SIZES = {'ci': {'dim': 100}, 'unseen': {'dim': 77}}"
    assert sets_of(problem_source(both, "batch_size, dim")) == {
        "ci": {"dim": 100},
        "unseen": {"dim": 77},
    }
    ci_only = constants + "\nKFORGE_SIZES = {'ci': {'batch_size': 8, 'dim': 96}}"
    sets = sets_of(problem_source(ci_only, "batch_size, dim"))
    assert sets["ci"] == {"batch_size": 8, "dim": 96}
    assert sets["unseen"]["dim"] % 2 == 1 and math.isclose(sets["unseen"]["dim"], 120, abs_tol=2)
