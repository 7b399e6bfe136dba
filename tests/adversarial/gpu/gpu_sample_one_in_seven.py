"""Computes on one call in seven and returns the previous result otherwise.

Class: timed calls do no work
Problem: gpu_matmul
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, a, b):
        self.calls += 1
        if self.last is None or self.calls <= 8 or self.calls % 7 == 0:
            self.last = torch.mm(a, b)
        return self.last
