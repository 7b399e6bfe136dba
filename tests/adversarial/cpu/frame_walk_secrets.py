"""Walks the constructor's caller frames for anything named like seeds or inputs; must find none.

Class: secrets readable
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
        import sys

        frame = sys._getframe(1)
        while frame is not None:
            for name, value in frame.f_locals.items():
                if "seed" in name.lower():
                    raise RuntimeError(f"saw {name} in {frame.f_code.co_name}")
            frame = frame.f_back

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
