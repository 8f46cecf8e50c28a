"""Mean over the middle dimension of a 3-D tensor (the reduced dimension is dropped)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim1, dim2] -> [batch_size, dim2] for reduce_dim = 1
        return torch.mean(x, dim=self.reduce_dim)


batch_size = 128
dim1 = 4096
dim2 = 256
reduce_dim = 1

KFORGE_SIZES = {
    "ci": {"batch_size": 4, "dim1": 255, "dim2": 24},
    "unseen": {"batch_size": 3, "dim1": 70, "dim2": 19},
}


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
