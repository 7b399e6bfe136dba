"""Does the work on one call in seven, returns zeros otherwise (betting the checked calls are rare).

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls <= 8 or self.calls % 7 == 0:
            return reference_math(a, b, self.scale)
        return torch.zeros_like(a)
