"""Linear layer, 1-D max pooling along the output features, then multiplication by a scalar."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, pool_kernel_size: int, scaling_factor: float
    ):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.pool = nn.MaxPool1d(kernel_size=pool_kernel_size)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features // pool_kernel_size]
        x = self.linear(x)
        x = self.pool(x.unsqueeze(1)).squeeze(1)
        return x * self.scaling_factor


batch_size = 1024
in_features = 8192
out_features = 8192
pool_kernel_size = 4
scaling_factor = 1.5

# The unseen set leaves a remainder (54 = 13 * 4 + 2) that the pooling drops.
KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 97, "out_features": 80},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 54},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pool_kernel_size, scaling_factor]
