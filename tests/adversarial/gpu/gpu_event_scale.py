"""Scales every CUDA event interval its process measures down to a quarter.

Class: the judge is patchable
Problem: gpu_matmul
Expect: rejected/timing_forged | rejected/tamper
"""

import torch
import torch.nn as nn

_real = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, other: _real(self, other) / 4


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
