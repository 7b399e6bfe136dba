"""Skips the last 2% of the reduction dimension to save work.

Class: partial computation
Problem: linear_gelu
Expect: wrong_output/tolerance
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        k = x.shape[1] - x.shape[1] // 50
        return torch.nn.functional.gelu(x[:, :k] @ self.linear.weight[:, :k].t() + self.linear.bias)
