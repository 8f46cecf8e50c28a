import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Matmul with a (K, N) weight, division by a constant, a sum over the outputs (keepdim),
    then a max and a mean over that single column.
    """

    def __init__(self, input_size, hidden_size, divisor):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(input_size, hidden_size) * 0.05)
        self.divisor = divisor

    def forward(self, x):
        x = torch.matmul(x, self.weight)
        x = x / self.divisor
        x = torch.sum(x, dim=-1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        x = torch.mean(x, dim=1, keepdim=True)
        return x


batch_size = 512
input_size = 8192
hidden_size = 8192
divisor = 2.0

KFORGE_SIZES = {
    "ci": {"batch_size": 13, "input_size": 50, "hidden_size": 27},
    "unseen": {"batch_size": 6, "input_size": 31, "hidden_size": 18},
}


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, divisor]
