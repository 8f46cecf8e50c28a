import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer, BatchNorm1d in training mode, LogSumExp over the features (keepdim),
    then ReLU.
    """

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.batch_norm = nn.BatchNorm1d(out_features)

    def forward(self, x):
        x = self.linear(x)
        x = self.batch_norm(x)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return torch.relu(x)


batch_size = 2048
in_features = 4096
out_features = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 15, "in_features": 38, "out_features": 23},
    "unseen": {"batch_size": 8, "in_features": 25, "out_features": 30},
}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
