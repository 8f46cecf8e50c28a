"""Matrix-vector multiplication: an M x K matrix times a K x 1 vector."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # a: [M, K], v: [K, 1] -> [M, 1]
        return torch.matmul(a, v)


M = 16384
K = 8192

KFORGE_SIZES = {
    "ci": {"M": 97, "K": 1000},
    "unseen": {"M": 256, "K": 333},
}


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
