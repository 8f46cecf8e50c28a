"""Linear layer, subtraction of a scalar, tanh, then multiplication by a scalar."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self, in_features: int, out_features: int, subtract_value: float, multiply_value: float
    ):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] -> [batch_size, out_features]
        x = self.linear(x) - self.subtract_value
        return torch.tanh(x) * self.multiply_value


batch_size = 512
in_features = 8192
out_features = 16384
subtract_value = 0.25
multiply_value = 1.5

KFORGE_SIZES = {
    "ci": {"batch_size": 16, "in_features": 99, "out_features": 80},
    "unseen": {"batch_size": 7, "in_features": 64, "out_features": 50},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, subtract_value, multiply_value]
