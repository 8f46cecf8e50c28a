import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Linear layer, GroupNorm over groups of features, then a softmax over all the features
    (statistics per group, then per row), scaled by a learned vector.
    """

    def __init__(self, in_features, out_features, num_groups, scale_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.scale = nn.Parameter(torch.rand(scale_shape) + 0.5)

    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = torch.softmax(x, dim=1)
        return x * self.scale


batch_size = 1024
in_features = 8192
out_features = 8192
num_groups = 64
scale_shape = (out_features,)

KFORGE_SIZES = {
    "ci": {"batch_size": 10, "in_features": 37, "out_features": 24, "num_groups": 4},
    "unseen": {"batch_size": 7, "in_features": 25, "out_features": 18, "num_groups": 3},
}


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, scale_shape]
