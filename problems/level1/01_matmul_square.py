"""Square matrix multiplication: C = A @ B with A and B both N x N."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a: [N, N], b: [N, N] -> [N, N]
        return torch.matmul(a, b)


N = 8192

KFORGE_SIZES = {
    "ci": {"N": 67},
    "unseen": {"N": 45},
}


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
