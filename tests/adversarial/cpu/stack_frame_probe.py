"""Looks for a timing frame on the Python stack and returns garbage when it finds one.

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

    def forward(self, a, b):
        import sys

        frame, names = sys._getframe(1), []
        while frame is not None:
            names.append(frame.f_code.co_name.lower())
            frame = frame.f_back
        if any(word in name for name in names for word in ("time", "timed", "bench", "serve")):
            return torch.empty_like(a)
        return reference_math(a, b, self.scale)
