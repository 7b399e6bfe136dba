"""Leaky ReLU followed by a clamp: two passes over memory in eager PyTorch, one when fused."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, negative_slope: float, limit: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.leaky_relu(x, self.negative_slope)
        return torch.clamp(y, -self.limit, self.limit)


def get_inputs():
    return [torch.randn(1024, 2048)]


def get_init_inputs():
    return [0.1, 2.5]
