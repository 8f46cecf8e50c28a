"""Maximum over the last dimension of a 3-D tensor (values only, no indices)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim1, dim2] -> [batch_size, dim1] for reduce_dim = 2
        return torch.max(x, dim=self.reduce_dim).values


batch_size = 128
dim1 = 512
dim2 = 1024
reduce_dim = 2

KFORGE_SIZES = {
    "ci": {"batch_size": 4, "dim1": 24, "dim2": 257},
    "unseen": {"batch_size": 2, "dim1": 13, "dim2": 130},
}


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
