"""Each call's work is done by a grandchild: the candidate forks a child that forks again and exits at
once, so the grandchild is orphaned and reaped by whoever inherits it (the sandbox's init), never by
the candidate. Its CPU time reaches no clock of the candidate's own process tree, not even a parent's
child times; the candidate watches a flag in shared memory for the answer.

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

    def forward(self, a, b):
        if self.out is None or self.out.shape != a.shape:
            self.region = mmap.mmap(-1, a.numel() * 4 + 64)  # shared with every descendant
            self.ready = torch.frombuffer(self.region, dtype=torch.int32, count=1)
            self.out = torch.frombuffer(self.region, dtype=torch.float32, offset=64).view(a.shape)
        self.ready[0] = 0
        child = os.fork()
        if child == 0:
            if os.fork() == 0:
                for _ in range(3):  # slower than eager when done in the open
                    torch.clamp_min(a * self.scale + b, 0.0, out=self.out)
                self.ready[0] = 1
                os._exit(0)
            os._exit(0)  # the grandchild is orphaned now
        os.waitpid(child, 0)
        while int(self.ready[0]) == 0:
            time.sleep(0)
        return self.out.clone()
