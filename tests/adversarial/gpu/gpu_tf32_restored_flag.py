"""Computes with TF32 tensor cores and restores the flag afterwards.

Class: precision downgrade
Problem: gpu_matmul
Expect: wrong_output/tolerance
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.mm(a, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
