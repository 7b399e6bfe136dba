"""Problem: relu(a * scale + b) on a 1024 x 1024 block.

Elementwise, about a millisecond a call on one core: several times the harness's CPU share of a call,
so a small VM's noise in that share can pass neither for a speedup nor for a lie."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a * self.scale + b)


def get_inputs():
    return [torch.randn(1024, 1024), torch.randn(1024, 1024)]


def get_init_inputs():
    return [0.5]
