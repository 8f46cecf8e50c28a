import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Matmul with a learned (K, N) weight, functional dropout in training mode, a sum over
    the features, then sigmoid.
    """

    def __init__(self, in_features, out_features, dropout_p):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.02)
        self.dropout_p = dropout_p

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = F.dropout(x, p=self.dropout_p, training=self.training)
        x = x.sum(dim=1)
        return torch.sigmoid(x)


batch_size = 1024
in_features = 8192
out_features = 4096
dropout_p = 0.1

KFORGE_SIZES = {
    "ci": {"batch_size": 9, "in_features": 44, "out_features": 25},
    "unseen": {"batch_size": 5, "in_features": 29, "out_features": 16},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
