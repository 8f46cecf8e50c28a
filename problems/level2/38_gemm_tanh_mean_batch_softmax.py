import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer, tanh, the mean over the features, then a softmax over the batch of those
    means (each sample's weight in the batch).
    """

    def __init__(self, in_features, out_features, temperature):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.temperature = temperature

    def forward(self, x):
        x = torch.tanh(self.linear(x))
        x = x.mean(dim=1)
        return torch.softmax(x / self.temperature, dim=0)


batch_size = 4096
in_features = 4096
out_features = 4096
temperature = 0.05

KFORGE_SIZES = {
    "ci": {"batch_size": 19, "in_features": 35, "out_features": 22},
    "unseen": {"batch_size": 11, "in_features": 24, "out_features": 17},
}


def get_inputs():
    return [torch.rand(batch_size, in_features) * 2 - 1]


def get_init_inputs():
    return [in_features, out_features, temperature]
