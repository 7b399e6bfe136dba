"""Computes honestly for its first calls, then returns a view of the harness's shared output region,
whose bytes are the last output the worker read: the worker is asked to read a result out of its own
buffer (a replay of an earlier call's output, for inputs that no longer match).

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/* | rejected/* | runtime_error/*
"""

import sys

import torch
import torch.nn as nn


def _harness():
    frame = sys._getframe(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if type(obj).__name__ == "Runner" and hasattr(obj, "outputs_region"):
            return obj
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls <= 4:
            return torch.relu(a * self.scale + b)
        runner = _harness()
        if runner is None:
            return torch.empty_like(a)
        return runner.outputs_region.flat[: a.numel() * 4].view(torch.float32).view(a.shape)
