"""Takes nearly all free GPU memory in its constructor, then computes honestly.

Class: blame and crashes
Problem: gpu_matmul
Expect: passed<=1.05 | runtime_error/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        free, _ = torch.cuda.mem_get_info()
        self.hog = torch.empty(int(free * 0.92), dtype=torch.uint8, device="cuda")

    def forward(self, a, b):
        return torch.mm(a, b)
