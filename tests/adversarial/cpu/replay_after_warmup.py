"""Computes for the first calls, then replays the last output it computed.

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
        self.last = None

    def forward(self, a, b):
        self.calls += 1
        if self.calls <= 12 or self.last is None:
            self.last = reference_math(a, b, self.scale)
        return self.last
