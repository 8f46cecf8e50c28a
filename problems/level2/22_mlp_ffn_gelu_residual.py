"""Transformer feed-forward block: Linear, tanh-approximate GELU, Linear, plus a residual input."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, d_model] -> [batch_size, d_model]
        return x + self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


batch_size = 2048
d_model = 2048
d_ff = 8192

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "d_model": 96, "d_ff": 257},
    "unseen": {"batch_size": 9, "d_model": 52, "d_ff": 144},
}


def get_inputs():
    return [torch.randn(batch_size, d_model)]


def get_init_inputs():
    return [d_model, d_ff]
