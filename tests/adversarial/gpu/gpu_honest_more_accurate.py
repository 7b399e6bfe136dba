"""Honest and more accurate than the reference: the product accumulated in float64.

Class: honest control (precision contract)
Problem: gpu_matmul
Expect: passed
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.double() @ b.double()).float()
