"""A @ b with one output column is a row pass: each row of A times b, summed in double
precision (handlers._matvec). As a GEMM it padded the column to a tile of 16 to 64 (H200,
4_Matrix_vector_multiplication_: 0.68x of compile). On Triton's interpreter: b stored
[K, 1] or as the transpose of a [1, K] input, torch.rand and torch.randn inputs, odd sizes;
a matrix with two columns stays a GEMM."""

from __future__ import annotations

import pytest

from kforge_search.agents.builtin import TritonGenome
from tests.agents.builtin.harness import drafted

GENOME = TritonGenome(block_m=16, block_n=64, pass_block=64, pass_programs=0)

CASES = {  # forward, inputs, a row pass (else a GEMM)
    "column": ("return torch.matmul(x, y)", "[torch.rand(37, 1031), torch.rand(1031, 1)]", True),
    "transposed_row": ("return x @ y.t()", "[torch.randn(29, 517), torch.randn(1, 517)]", True),
    "two_columns": (
        "return torch.matmul(x, y)",
        "[torch.randn(21, 77), torch.randn(77, 2)]",
        False,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_output_column_is_a_row_pass_and_verifies(verify, tmp_path, case):
    forward, inputs, row_pass = CASES[case]
    problem, draft = drafted(tmp_path, forward, inputs, GENOME)
    assert ("Ops: tile,mul,row_sum." in draft.source) is row_pass, draft.source[:400]
    result = verify(draft.source, problem)
    assert result.ok, result.message
