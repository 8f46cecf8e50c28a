"""Swish (SiLU) activation written out: x * sigmoid(x)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


batch_size = 4096
dim = 16384

KFORGE_SIZES = {
    "ci": {"batch_size": 12, "dim": 1023},
    "unseen": {"batch_size": 5, "dim": 1500},
}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
