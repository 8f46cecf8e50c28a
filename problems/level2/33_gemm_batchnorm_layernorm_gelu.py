import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Linear layer, BatchNorm1d in training mode (over the batch), LayerNorm (over the
    features), then GELU.
    """

    def __init__(self, in_features, out_features, eps):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=eps)
        self.ln = nn.LayerNorm(out_features, eps=eps)

    def forward(self, x):
        x = self.linear(x)
        x = self.bn(x)
        x = self.ln(x)
        return F.gelu(x)


batch_size = 1024
in_features = 8192
out_features = 4096
eps = 1e-5

KFORGE_SIZES = {
    "ci": {"batch_size": 12, "in_features": 36, "out_features": 21},
    "unseen": {"batch_size": 7, "in_features": 24, "out_features": 28},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, eps]
