"""Computes in place into an input and returns that very tensor.

Class: inputs
Problem: scaled_add
Expect: rejected/input_mutated | rejected/output_aliases_input
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
        return b.add_(a, alpha=self.scale).relu_()
