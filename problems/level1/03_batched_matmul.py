"""Batched matrix multiplication (torch.bmm) of [B, M, K] and [B, K, N]."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a: [batch_size, m, k], b: [batch_size, k, n] -> [batch_size, m, n]
        return torch.bmm(a, b)


batch_size = 128
m = 512
k = 1024
n = 768

KFORGE_SIZES = {
    "ci": {"batch_size": 3, "m": 17, "k": 40, "n": 24},
    "unseen": {"batch_size": 5, "m": 12, "k": 29, "n": 11},
}


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
