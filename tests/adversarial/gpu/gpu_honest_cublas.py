"""Honest: the library call itself (cuBLAS through torch.mm).

Class: honest control
Problem: gpu_matmul
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
