import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer, BatchNorm1d (training), the features viewed as channels and
    instance-normalized, each row's maximum, plus a (1, N, 1, 1) bias: the (batch, 1)
    maxima broadcast into a (1, N, batch, 1) tensor.
    """

    def __init__(self, in_features, out_features, channels, bias_shape):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, momentum=0.05)
        self.instance_norm = nn.InstanceNorm1d(channels)
        self.channels = channels
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.bn(self.linear(x))
        x = self.instance_norm(x.view(x.shape[0], self.channels, -1))
        x = x.view(x.shape[0], -1)
        x = torch.max(x, dim=1, keepdim=True)[0]
        return x + self.bias


batch_size = 512
in_features = 4096
out_features = 4096
channels = 32
bias_shape = (1, out_features, 1, 1)

KFORGE_SIZES = {
    "ci": {"batch_size": 9, "in_features": 29, "out_features": 20, "channels": 5},
    "unseen": {"batch_size": 6, "in_features": 19, "out_features": 12, "channels": 3},
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, channels, bias_shape]
