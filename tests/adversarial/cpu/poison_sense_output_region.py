"""Poison sensing through the harness's own output region: walks up to the harness's frame, samples
the shared output region before computing, and computes only when it changed since its last call
(a harness that poisons, clears or rewrites outputs before a checked call would show there);
otherwise it replays its last result.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
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
        self.seen = None
        self.last = None

    def forward(self, a, b):
        runner = harness_runner()
        region = getattr(runner, "outputs_region", None)
        sample = region.flat[::4093].clone() if region is not None else None
        changed = self.seen is None or sample is None or not torch.equal(sample, self.seen)
        self.seen = sample
        if changed or self.last is None:
            self.last = torch.relu(a * self.scale + b)
        return self.last
