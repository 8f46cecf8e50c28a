"""Linear layer, multiplication by a scalar, then a residual add of a second input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features], residual: [batch_size, out_features]
        # -> [batch_size, out_features]
        return self.linear(x) * self.scaling_factor + residual


batch_size = 1024
in_features = 8192
out_features = 8192
scaling_factor = 0.5

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 96, "out_features": 81},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52},
}


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
