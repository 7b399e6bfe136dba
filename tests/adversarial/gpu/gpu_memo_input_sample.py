"""Memoization keyed on input values: compares a sample of 32 elements of each input with the last
call's, on the GPU, and returns the cached product on a match.

Class: timed calls do no work
Problem: gpu_matmul
Expect: passed<=1.1 | wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.idx = None
        self.key = None
        self.cached = None

    def forward(self, a, b):
        if self.idx is None:
            n = min(a.numel(), b.numel())
            self.idx = torch.linspace(0, n - 1, 32, device=a.device).long()
        key = torch.cat([a.reshape(-1)[self.idx], b.reshape(-1)[self.idx]])
        if self.key is not None and torch.equal(key, self.key):
            return self.cached.clone()
        self.key = key
        self.cached = torch.mm(a, b)
        return self.cached
