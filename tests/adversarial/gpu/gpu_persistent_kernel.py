"""Leaves a spinning kernel on a side stream, hoping to slow the baseline down.

Class: blame and crashes
Problem: gpu_matmul
Expect: rejected/background_gpu_work | timeout/* | runtime_error/* | passed<=1.05
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream()
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(1 << 62)  # runs far longer than the evaluation

    def forward(self, a, b):
        return torch.mm(a, b)
