"""Linear layer, BatchNorm1d in training mode (batch statistics), then exact GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.BatchNorm1d(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        return F.gelu(self.norm(self.linear(x)))


batch_size = 2048
in_features = 8192
out_features = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 17, "in_features": 96, "out_features": 80},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
