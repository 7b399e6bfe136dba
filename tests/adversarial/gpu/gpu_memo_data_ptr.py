"""Memoizes outputs per input buffer address.

Class: timed calls do no work
Problem: gpu_matmul
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, a, b):
        key = (a.data_ptr(), b.data_ptr())
        if key not in self.memo:
            self.memo[key] = torch.mm(a, b)
        return self.memo[key]
