import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Two linear layers in a chain: the first followed by LayerNorm and GELU, the second by
    a softmax over its outputs.
    """

    def __init__(self, in_features, hidden_features, out_features):
        super(Model, self).__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.norm = nn.LayerNorm(hidden_features)
        self.fc2 = nn.Linear(hidden_features, out_features)

    def forward(self, x):
        x = F.gelu(self.norm(self.fc1(x)))
        x = self.fc2(x)
        return torch.softmax(x, dim=1)


batch_size = 1024
in_features = 4096
hidden_features = 8192
out_features = 4096

KFORGE_SIZES = {
    "ci": {"batch_size": 10, "in_features": 34, "hidden_features": 45, "out_features": 19},
    "unseen": {"batch_size": 6, "in_features": 23, "hidden_features": 30, "out_features": 14},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
