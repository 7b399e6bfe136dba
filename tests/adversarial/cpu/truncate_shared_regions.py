"""Shrinks every shared memory region it can reach (its input and output regions) to nothing, then
computes honestly: the trusted worker's next write into a truncated mapping would fault.

Class: blame and crashes
Problem: scaled_add
Expect: runtime_error/* | rejected/* | passed<=1.35
"""

import os

import torch
import torch.nn as nn


def _shrink_regions() -> int:
    shrunk = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/memfd:"):
            try:
                os.ftruncate(int(name), 0)
                shrunk += 1
            except OSError:
                pass
    return shrunk


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        out = torch.relu(a * self.scale + b)
        if self.calls == 2:
            _shrink_regions()
        return out
