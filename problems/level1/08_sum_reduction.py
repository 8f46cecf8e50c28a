"""Sum over one dimension of a 3-D tensor, keeping the reduced dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim1, dim2] -> [batch_size, 1, dim2] for reduce_dim = 1
        return torch.sum(x, dim=self.reduce_dim, keepdim=True)


batch_size = 64
dim1 = 1024
dim2 = 1024
reduce_dim = 1

KFORGE_SIZES = {
    "ci": {"batch_size": 4, "dim1": 101, "dim2": 48},
    "unseen": {"batch_size": 3, "dim1": 66, "dim2": 35},
}


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
