"""Linear layer, 1-D average pooling along the output features, then exact GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, pool_kernel_size: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.pool = nn.AvgPool1d(kernel_size=pool_kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features // pool_kernel_size]
        x = self.linear(x)
        x = self.pool(x.unsqueeze(1)).squeeze(1)
        return F.gelu(x)


batch_size = 2048
in_features = 8192
out_features = 4096
pool_kernel_size = 8

KFORGE_SIZES = {
    "ci": {"batch_size": 13, "in_features": 96, "out_features": 80},
    "unseen": {"batch_size": 6, "in_features": 72, "out_features": 56},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pool_kernel_size]
