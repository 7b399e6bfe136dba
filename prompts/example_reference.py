import torch
import torch.nn as nn


class Model(nn.Module):
    """Gates one input by the sigmoid of another, scales it and adds a learned bias.

    out = a * sigmoid(b) * scale + bias, with bias broadcast over the last dimension.
    """

    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * torch.sigmoid(b) * self.scale + self.bias


rows = 4096
features = 2048
scale = 0.75


def get_inputs():
    return [torch.randn(rows, features), torch.randn(rows, features)]


def get_init_inputs():
    return [features, scale]
