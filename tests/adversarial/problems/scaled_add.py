"""Problem: relu(a * scale + b) on a 256 x 1024 block (elementwise; cheap enough for CPU CI)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a * self.scale + b)


def get_inputs():
    return [torch.randn(256, 1024), torch.randn(256, 1024)]


def get_init_inputs():
    return [0.5]
