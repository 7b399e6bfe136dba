"""An honest library call: F.linear and GELU, exactly the reference's math.

Class: honest control
Problem: linear_gelu
Expect: passed
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return F.gelu(F.linear(x, self.linear.weight, self.linear.bias))
