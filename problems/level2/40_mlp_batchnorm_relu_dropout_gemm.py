import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Two linear layers: the first followed by BatchNorm1d (training), ReLU and Dropout, the
    second by a learned (1, N) bias.
    """

    def __init__(self, in_features, hidden_features, out_features, dropout_p, bias_shape):
        super(Model, self).__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.bn = nn.BatchNorm1d(hidden_features)
        self.dropout = nn.Dropout(dropout_p)
        self.fc2 = nn.Linear(hidden_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x):
        x = self.dropout(torch.relu(self.bn(self.fc1(x))))
        return self.fc2(x) + self.bias


batch_size = 1024
in_features = 4096
hidden_features = 8192
out_features = 4096
dropout_p = 0.2
bias_shape = (1, out_features)

KFORGE_SIZES = {
    "ci": {"batch_size": 13, "in_features": 30, "hidden_features": 41, "out_features": 18},
    "unseen": {"batch_size": 8, "in_features": 22, "hidden_features": 27, "out_features": 12},
}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features, dropout_p, bias_shape]
