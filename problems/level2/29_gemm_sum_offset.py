import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer summed over its output features, minus a constant offset.
    """

    def __init__(self, in_features, out_features, offset):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.offset = offset

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1)
        return x - self.offset


batch_size = 1024
in_features = 8192
out_features = 8192
offset = 0.75

KFORGE_SIZES = {
    "ci": {"batch_size": 12, "in_features": 47, "out_features": 29},
    "unseen": {"batch_size": 7, "in_features": 33, "out_features": 20},
}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, offset]
