"""Linear layer, GroupNorm over groups of output features, then Swish (x * sigmoid(x))."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        x = self.norm(self.linear(x))
        return x * torch.sigmoid(x)


batch_size = 1024
in_features = 8192
out_features = 8192
num_groups = 32

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 97, "out_features": 80, "num_groups": 5},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52, "num_groups": 4},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
