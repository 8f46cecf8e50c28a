import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer whose output is viewed as a small image, instance normalization over each
    channel's pixels, then a residual add and a multiplication by a second input.
    """

    def __init__(self, in_features, channels, height, width, eps=1e-5):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, channels * height * width)
        self.instance_norm = nn.InstanceNorm2d(channels, eps=eps, affine=True)
        self.shape = (channels, height, width)

    def forward(self, x, y):
        x = self.linear(x)
        x = x.view(x.shape[0], self.shape[0], self.shape[1], self.shape[2])
        x = self.instance_norm(x)
        x = x.view(x.shape[0], -1)
        x = x + y
        return x * y


batch_size = 512
in_features = 4096
channels = 64
height = 8
width = 8
out_features = channels * height * width
eps = 1e-5

KFORGE_SIZES = {
    "ci": {"batch_size": 7, "in_features": 37, "channels": 3, "height": 2, "width": 5},
    "unseen": {"batch_size": 5, "in_features": 29, "channels": 4, "height": 3, "width": 3},
}


def get_inputs():
    return [torch.rand(batch_size, in_features), torch.rand(batch_size, out_features)]


def get_init_inputs():
    return [in_features, channels, height, width, eps]
