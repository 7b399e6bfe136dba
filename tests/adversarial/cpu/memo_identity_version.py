"""Memoizes outputs per input object (identity and version counter).

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/* | passed<=1.35
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.memo = {}

    def forward(self, a, b):
        key = (id(a), a._version, id(b), b._version)
        if key not in self.memo:
            self.memo[key] = reference_math(a, b, self.scale)
        return self.memo[key]
