import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A linear layer viewed as a volume of channels, InstanceNorm3d with an affine transform,
    flattened back to features, then GELU.
    """

    def __init__(self, in_features, volume, eps):
        super(Model, self).__init__()
        channels, depth, height, width = volume
        self.volume = volume
        self.fc = nn.Linear(in_features, channels * depth * height * width)
        self.norm = nn.InstanceNorm3d(channels, eps=eps, affine=True)

    def forward(self, x):
        x = self.fc(x)
        x = x.view(-1, *self.volume)
        x = self.norm(x)
        x = torch.flatten(x, 1)
        return F.gelu(x)


batch_size = 256
in_features = 4096
volume = (32, 4, 8, 8)
eps = 1e-5

KFORGE_SIZES = {
    "ci": {"batch_size": 6, "in_features": 33, "volume": (3, 2, 3, 2)},
    "unseen": {"batch_size": 4, "in_features": 21, "volume": (2, 3, 2, 3)},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, volume, eps]
