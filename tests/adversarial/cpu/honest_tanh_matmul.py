"""Honest control for the small-lie cases: the problem's own math, on a problem long enough per call
that the trusted clock's slack is its relative part.

Class: honest control
Problem: tanh_matmul
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.mm(x, self.weight))
