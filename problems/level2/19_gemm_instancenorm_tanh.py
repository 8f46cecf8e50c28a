"""Linear layer, InstanceNorm1d over channels of output features (via reshape), then tanh."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_channels: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.InstanceNorm1d(num_channels, affine=True)
        self.num_channels = num_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        x = self.linear(x)
        n = x.shape[0]
        # Each row becomes num_channels channels of out_features // num_channels values.
        x = self.norm(x.view(n, self.num_channels, -1)).view(n, -1)
        return torch.tanh(x)


batch_size = 1024
in_features = 8192
out_features = 8192
num_channels = 64

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 97, "out_features": 80, "num_channels": 8},
    "unseen": {"batch_size": 9, "in_features": 72, "out_features": 52, "num_channels": 4},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_channels]
