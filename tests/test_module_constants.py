"""Module-level constants read and rewritten without running the file: every form of
binding KernelBench files use, values computed from others following overrides."""

from __future__ import annotations

import ast
import json

import pytest

from kforge_search.module_constants import (
    assignable,
    evaluate,
    free_constants,
    rewrite,
)

SOURCE = """
import torch

def helper(x):
    return x

M = 1024 * 2
K = 4096 * 2
N = 2 * M
height = width = 256
depth, rows, cols = (16, 32, 32)
a, b = helper(3), 4
kernel_size = (3, 5)
layer_sizes = [64] * 3
bias_shape = (N, 1, 1)
hidden = 8
hidden = 12
after = hidden * 2
to_2tuple = helper(2)
eps: float = 1e-5
"""


def _run(tree: ast.Module) -> dict:
    namespace: dict = {}
    exec(compile(ast.unparse(tree), "<problem>", "exec"), namespace)
    return namespace


def test_every_binding_form_is_read_with_its_value():
    tree = ast.parse(SOURCE)
    values = evaluate(tree)
    assert values["M"] == 2048 and values["K"] == 8192 and values["N"] == 4096
    assert values["height"] == values["width"] == 256
    assert (values["depth"], values["rows"], values["cols"]) == (16, 32, 32)
    assert values["bias_shape"] == (4096, 1, 1)
    assert values["layer_sizes"] == [64, 64, 64]
    assert values["hidden"] == 12 and values["after"] == 24  # the binding in force
    assert values["eps"] == 1e-5
    assert values["b"] == 4 and "a" not in values  # a call is not evaluated
    assert "to_2tuple" not in values


def test_free_constants_leave_out_values_computed_from_others():
    free = free_constants(ast.parse(SOURCE))
    assert free["M"] == 2048 and free["layer_sizes"] == (64, 64, 64)
    assert {"N", "bias_shape", "after", "a"}.isdisjoint(free)
    assert free["hidden"] == 12


def test_every_bound_name_may_be_overridden():
    names = assignable(ast.parse(SOURCE))
    assert {"M", "height", "width", "depth", "rows", "a", "b", "bias_shape", "eps"} <= names
    assert "helper" not in names


def test_overrides_rewrite_each_form_and_computed_values_follow():
    overrides = {"M": 8, "width": 5, "rows": 7, "a": 1, "hidden": 3, "eps": 0.5}
    ns = _run(rewrite(ast.parse(SOURCE), overrides))
    assert ns["M"] == 8 and ns["N"] == 16 and ns["bias_shape"] == (16, 1, 1)
    assert ns["height"] == 256 and ns["width"] == 5
    assert (ns["depth"], ns["rows"], ns["cols"]) == (16, 7, 32)
    assert ns["a"] == 1 and ns["b"] == 4
    assert ns["hidden"] == 3 and ns["after"] == 6  # both bindings of hidden are set
    assert ns["eps"] == 0.5


def test_a_value_keeps_the_kind_of_sequence_the_name_had():
    # a job travels as JSON: tuples come back as lists
    overrides = json.loads(json.dumps({"kernel_size": (1, 3), "layer_sizes": (4, 4)}))
    ns = _run(rewrite(ast.parse(SOURCE), overrides))
    assert ns["kernel_size"] == (1, 3) and ns["layer_sizes"] == [4, 4]


def test_a_value_that_is_no_literal_is_refused():
    with pytest.raises(ValueError, match="cannot be written as a Python literal"):
        rewrite(ast.parse(SOURCE), {"M": float("inf")})


@pytest.mark.parametrize(
    "expr", ["[0] * 10**9", "10 ** 10 ** 10", "'x' * 10**9", "1 / 0", "foo.bar", "f(2)"]
)
def test_what_cannot_be_evaluated_safely_is_left_out(expr):
    assert "x" not in evaluate(ast.parse(f"x = {expr}"))
