"""GELU activation with the tanh approximation."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


batch_size = 4096
dim = 16384

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "dim": 999},
    "unseen": {"batch_size": 3, "dim": 2050},
}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
