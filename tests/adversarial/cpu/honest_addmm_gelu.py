"""An honest algebraic rewrite: the bias folded into one addmm, then GELU.

Class: honest control
Problem: linear_gelu
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.nn.functional.gelu(torch.addmm(self.linear.bias, x, self.linear.weight.t()))
