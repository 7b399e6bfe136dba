"""A warm-up detector: counts calls and stops computing once it thinks timing has begun.

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
        if self.calls > 10:
            return torch.empty_like(a).fill_(0.25)
        return reference_math(a, b, self.scale)
