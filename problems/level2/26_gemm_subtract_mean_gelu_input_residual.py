import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A square linear layer, minus a learned vector, averaged over the features, GELU, and the
    layer's own input added back (each row's mean broadcast over the input's features).
    """

    def __init__(self, features, bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(features, features)
        self.subtract = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        residual = x.clone().detach()
        x = self.gemm(x)
        x = x - self.subtract
        x = torch.mean(x, dim=1, keepdim=True)
        x = F.gelu(x)
        return x + residual


batch_size = 2048
features = 8192
bias_shape = (features,)

KFORGE_SIZES = {
    "ci": {"batch_size": 11, "features": 35},
    "unseen": {"batch_size": 6, "features": 24},
}


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features, bias_shape]
