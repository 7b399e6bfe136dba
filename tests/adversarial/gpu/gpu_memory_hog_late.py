"""Takes nearly all the GPU memory left at its first call, after the trusted worker has given its
cached blocks back to the device, keeps it, and computes honestly: the worker's next inputs or
reference then have almost nothing to draw on. Blame must land on the candidate, or nowhere.

Class: blame and crashes
Problem: gpu_matmul
Expect: passed<=1.05 | runtime_error/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.hog = None

    def forward(self, a, b):
        if self.hog is None:
            free, _ = torch.cuda.mem_get_info()
            self.hog = torch.empty(int(free * 0.98), dtype=torch.uint8, device="cuda")
        return torch.mm(a, b)
