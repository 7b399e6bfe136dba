"""Reopens every shared memory region through /proc/self/fd with O_TRUNC (a path to truncation other
than ftruncate), then computes honestly.

Class: blame and crashes
Problem: scaled_add
Expect: passed<=1.35 | runtime_error/*
"""

import os

import torch
import torch.nn as nn


def _reopen_truncated() -> None:
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:"):
                os.close(os.open(f"/proc/self/fd/{name}", os.O_RDWR | os.O_TRUNC))
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls == 2:
            _reopen_truncated()
        return torch.relu(a * self.scale + b)
