import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Linear layer, Dropout (training mode: a random mask, survivors scaled by 1 / (1 - p)),
    GELU, then a constant scale.
    """

    def __init__(self, in_features, out_features, dropout_p, scale):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        x = self.dropout(x)
        return F.gelu(x) * self.scale


batch_size = 1024
in_features = 8192
out_features = 8192
dropout_p = 0.25
scale = 2.0

KFORGE_SIZES = {
    "ci": {"batch_size": 11, "in_features": 40, "out_features": 27},
    "unseen": {"batch_size": 6, "in_features": 26, "out_features": 18},
}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p, scale]
