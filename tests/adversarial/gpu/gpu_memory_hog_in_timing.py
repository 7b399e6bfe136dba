"""Computes honestly, and once the timing phase is under way (its 12th call; correctness takes 3
per shape) takes nearly all the GPU memory left and keeps it while it is frozen for the baseline's
blocks: the baseline's own forward, the worker's next inputs and references then have almost
nothing to draw on. A later moment than at its first call, and the baseline runner, another
process, is the one that runs short. Blame must land on the candidate, or nowhere.

Class: blame and crashes
Problem: gpu_matmul
Expect: passed<=1.05 | runtime_error/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.hog = None

    def forward(self, a, b):
        self.calls += 1
        if self.calls == 12 and self.hog is None:
            free, _ = torch.cuda.mem_get_info()
            self.hog = torch.empty(int(free * 0.98), dtype=torch.uint8, device="cuda")
        return torch.mm(a, b)
