"""Forks a child per call that does the work into shared memory and exits; the parent watches a flag
in that memory instead of waiting, and reaps the child only at the next call. At every reading of the
clocks the worker of that call is a zombie, in no live process list (another timing of work that no
live process's clock shows).

Class: the judge is patchable
Problem: scaled_add
Expect: passed<=1.35 | rejected/* | runtime_error/*
"""

import mmap
import os
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.out = None
        self.previous = None

    def forward(self, a, b):
        if self.previous is not None:
            os.waitpid(self.previous, 0)  # last call's child, a zombie since then
            self.previous = None
        if self.out is None or self.out.shape != a.shape:
            self.block = mmap.mmap(-1, a.numel() * 4 + 64)  # shared with the forked children
            self.flag = torch.frombuffer(self.block, dtype=torch.int32, count=1)
            self.out = torch.frombuffer(self.block, dtype=torch.float32, offset=64).view(a.shape)
        self.flag[0] = 0
        pid = os.fork()
        if pid == 0:
            for _ in range(3):  # slower than eager when done in the open
                torch.clamp_min(a * self.scale + b, 0.0, out=self.out)
            self.flag[0] = 1
            os._exit(0)
        while int(self.flag[0]) == 0:
            time.sleep(0)
        self.previous = pid
        return self.out.clone()
