"""Euclidean (L2) norm of each row: a reduction-only op with one output value per row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> [batch_size]
        return torch.sqrt(torch.sum(x * x, dim=1))


batch_size = 16384
dim = 8192

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "dim": 999},
    "unseen": {"batch_size": 7, "dim": 130},
}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
