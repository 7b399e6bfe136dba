"""Runs the product on a side stream the current stream never waits for.

Class: timing: work hidden from the timer
Problem: gpu_matmul
Expect: passed<=1.05 | wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream()

    def forward(self, a, b):
        with torch.cuda.stream(self.stream):
            return torch.mm(a, b)
