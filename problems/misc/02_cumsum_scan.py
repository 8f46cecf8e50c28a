"""Inclusive prefix sum (torch.cumsum) along the last dimension of each row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scan_dim: int):
        super().__init__()
        self.scan_dim = scan_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> same shape
        return torch.cumsum(x, dim=self.scan_dim)


batch_size = 4096
dim = 16384
scan_dim = 1

KFORGE_SIZES = {
    "ci": {"batch_size": 8, "dim": 1001},
    "unseen": {"batch_size": 5, "dim": 300},
}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scan_dim]
