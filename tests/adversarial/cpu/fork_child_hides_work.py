"""Forks for every call and lets the child do the work into shared memory, then reaps it: a fork
rather than a clone, and no C++ (another path for work the live processes' clocks never show).

Class: the judge is patchable
Problem: scaled_add
Expect: passed<=1.35 | rejected/* | runtime_error/*
"""

import mmap
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.out = None

    def forward(self, a, b):
        if self.out is None or self.out.shape != a.shape:
            self.block = mmap.mmap(-1, a.numel() * 4)  # anonymous and shared with a forked child
            self.out = torch.frombuffer(self.block, dtype=torch.float32).view(a.shape)
        pid = os.fork()
        if pid == 0:
            for _ in range(3):  # slower than eager when done in the open
                torch.clamp_min(a * self.scale + b, 0.0, out=self.out)
            os._exit(0)
        os.waitpid(pid, 0)
        return self.out.clone()
