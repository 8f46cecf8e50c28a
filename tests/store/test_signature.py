"""Op signatures read from problem sources (no torch), and their similarity vectors."""

from __future__ import annotations

import math

import pytest

from kforge_search.problem import resolve_problem
from kforge_search.store.signature import VECTOR_DIM, OpSignature, op_signature


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("level2/01_gemm_bias_relu", "linear,relu"),
        ("level2/17_gemm_groupnorm_swish", "linear,group_norm,sigmoid,mul"),
        ("level2/18_gemm_batchnorm_gelu", "linear,batch_norm,gelu"),
        ("level1/04_softmax", "softmax"),
        ("level1/15_swish", "sigmoid,mul"),
    ],
)
def test_signatures_of_bundled_problems(name, ops):
    assert op_signature(resolve_problem(name).source).text == ops


def test_unparsable_or_model_less_sources_have_an_empty_signature():
    assert op_signature("def (").ops == ()
    assert op_signature("x = 1").ops == ()


def _cos(a: OpSignature, b: OpSignature) -> float:
    return sum(x * y for x, y in zip(a.vector(), b.vector(), strict=True))


def test_vectors_are_unit_length_and_rank_similar_chains_higher():
    relu, gelu, softmax = (OpSignature(tuple(s.split(","))) for s in
                           ("linear,relu", "linear,gelu", "softmax"))  # fmt: skip
    assert len(relu.vector()) == VECTOR_DIM
    assert math.isclose(sum(v * v for v in OpSignature(()).vector()), 1.0)
    assert _cos(relu, relu) == pytest.approx(1.0)
    assert _cos(relu, gelu) > _cos(relu, softmax)
