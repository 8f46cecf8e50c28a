"""Linear layer, Swish (x * sigmoid(x)), then addition of a learnable bias vector."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        x = self.linear(x)
        x = x * torch.sigmoid(x)
        return x + self.bias


batch_size = 1024
in_features = 8192
out_features = 8192

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 97, "out_features": 80},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
