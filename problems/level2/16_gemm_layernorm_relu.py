"""Linear layer, LayerNorm over the output features, then ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        return torch.relu(self.norm(self.linear(x)))


batch_size = 2048
in_features = 4096
out_features = 8192

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 96, "out_features": 89},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
