"""Linear layer, Mish, then Hardtanh clipping to [hardtanh_min, hardtanh_max]."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, hardtanh_min: float, hardtanh_max: float
    ):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        return self.hardtanh(F.mish(self.linear(x)))


batch_size = 2048
in_features = 4096
out_features = 8192
hardtanh_min = -0.25
hardtanh_max = 0.75

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 96, "out_features": 81},
    "unseen": {"batch_size": 10, "in_features": 45, "out_features": 64},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, hardtanh_min, hardtanh_max]
