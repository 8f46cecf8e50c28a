"""Two-layer MLP: Linear, ReLU, Linear."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, hidden_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        return self.fc2(torch.relu(self.fc1(x)))


batch_size = 1024
in_features = 4096
hidden_features = 16384
out_features = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 96, "hidden_features": 131, "out_features": 80},
    "unseen": {"batch_size": 9, "in_features": 72, "hidden_features": 100, "out_features": 52},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
