"""Linear layer, addition of a learnable vector, then LeakyReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(out_features) * 0.02)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        x = self.linear(x) + self.add_value
        return F.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 1024
in_features = 16384
out_features = 4096
negative_slope = 0.1

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 128, "out_features": 77},
    "unseen": {"batch_size": 6, "in_features": 50, "out_features": 96},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, negative_slope]
