"""Elementwise chain: scale, shift, ReLU, rescale and offset in one pass over memory."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 1.5 + 0.25) * 2.0 - 0.1


batch_size = 4096
dim = 16384

# Small size sets for CPU tests ("ci") and for the unseen-size generalization check ("unseen").
KFORGE_SIZES = {
    "ci": {"batch_size": 16, "dim": 1000},
    "unseen": {"batch_size": 7, "dim": 1537},
}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
