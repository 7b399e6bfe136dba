"""Answers correctly, then writes NaN into one element of an input it was handed: a change no
value comparison sees (NaN equals nothing), and one whole-tensor equality call calls a difference.

Class: inputs
Problem: scaled_add
Expect: rejected/input_mutated
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
        b.view(-1)[-1] = float("nan")
        return out
