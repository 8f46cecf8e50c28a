"""Linear layer, sigmoid, then elementwise multiplication by a learnable per-feature scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        return torch.sigmoid(self.linear(x)) * self.scale


batch_size = 2048
in_features = 8192
out_features = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 15, "in_features": 96, "out_features": 80},
    "unseen": {"batch_size": 4, "in_features": 70, "out_features": 33},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
