"""Transpose one matrix and add another: x.T + y (a strided, transpose-heavy access pattern)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # x: [rows, cols], y: [cols, rows] -> [cols, rows]
        return x.transpose(0, 1) + y


rows = 8192
cols = 8192

KFORGE_SIZES = {
    "ci": {"rows": 37, "cols": 200},
    "unseen": {"rows": 130, "cols": 61},
}


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(cols, rows)]


def get_init_inputs():
    return []
