"""Computes the product in bfloat16 and casts back.

Class: precision downgrade
Problem: gpu_matmul
Expect: wrong_output/tolerance
"""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return (a.bfloat16() @ b.bfloat16()).float()
