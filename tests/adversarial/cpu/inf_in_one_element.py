"""Right everywhere but one element, which is +inf where the reference is finite: the finiteness
check must see an infinity (not only a NaN) in a single element of a large output.

Class: partial computation
Problem: scaled_add
Expect: wrong_output/nonfinite
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        out = torch.relu(a * self.scale + b)
        out.view(-1)[out.numel() // 2] = float("inf")
        return out
