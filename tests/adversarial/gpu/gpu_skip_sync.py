"""Replaces torch.cuda.synchronize with a no-op so its process answers before the GPU is done.

Class: timing: work hidden from the timer
Problem: gpu_matmul
Expect: passed<=1.05 | wrong_output/* | rejected/* | runtime_error/*
"""

import torch
import torch.nn as nn

torch.cuda.synchronize = lambda *args, **kwargs: None


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
