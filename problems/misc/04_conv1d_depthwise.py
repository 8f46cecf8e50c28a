"""Depthwise 1-D convolution (one filter per channel, same-length padding) with bias."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, channels, length] -> same shape (kernel_size is odd)
        return self.conv(x)


batch_size = 32
channels = 512
length = 4096
kernel_size = 7

KFORGE_SIZES = {
    "ci": {"batch_size": 2, "channels": 5, "length": 101},
    "unseen": {"batch_size": 3, "channels": 12, "length": 64},
}


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [channels, kernel_size]
