"""Prints a gigabyte to stdout at import; the evaluator must keep only the head and tail.

Class: blame and crashes
Problem: scaled_add
Expect: passed<=1.35
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        import os

        chunk = b"x" * (1 << 20)
        for _ in range(1024):
            os.write(1, chunk)

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
