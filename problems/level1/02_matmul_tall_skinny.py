"""Tall-skinny matrix multiplication: a tall M x K matrix times a narrow K x N matrix."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a: [M, K], b: [K, N] with M >> N -> [M, N]
        return torch.matmul(a, b)


M = 16384
K = 4096
N = 64

KFORGE_SIZES = {
    "ci": {"M": 131, "K": 48, "N": 7},
    "unseen": {"M": 97, "K": 33, "N": 12},
}


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
