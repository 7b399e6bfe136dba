"""An honest rewrite: one fused add with alpha, then an in-place relu.

Class: honest control
Problem: scaled_add
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.add(b, a, alpha=self.scale).relu_()
