"""Writes its result into the harness's shared output region (reached through the harness's frame)
and returns that view: the memory the harness publishes from, not memory of its own.

Class: the judge is patchable
Problem: scaled_add
Expect: rejected/output_in_harness_region
"""

import sys

import torch
import torch.nn as nn


def harness_runner():
    frame = sys._getframe(1)
    while frame is not None:
        runner = frame.f_locals.get("self")
        if type(runner).__name__ == "Runner":
            return runner
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        runner = harness_runner()
        region = getattr(runner, "outputs_region", None)
        if region is None:
            return torch.relu(a * self.scale + b)
        out = region.flat[: a.numel() * a.element_size()].view(a.dtype).view(a.shape)
        torch.add(b, a, alpha=self.scale, out=out).relu_()
        return out
