"""Layer normalization over the last dimension with a learnable elementwise affine."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, seq_len, hidden] -> same shape
        return self.norm(x)


batch_size = 16
seq_len = 1024
hidden = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 2, "seq_len": 9, "hidden": 999},
    "unseen": {"batch_size": 3, "seq_len": 5, "hidden": 520},
}


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
