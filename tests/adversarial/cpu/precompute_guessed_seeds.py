"""Precomputes outputs in __init__ from guessed seeds (0, 42, 1234) and replays them.

Class: secrets readable
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
        self.outs = []
        for seed in (0, 42, 1234):
            torch.manual_seed(seed)
            x, y = torch.randn(256, 1024), torch.randn(256, 1024)
            self.outs.append(reference_math(x, y, scale))

    def forward(self, a, b):
        for out in self.outs:
            return out
        return torch.zeros_like(a)
