"""Computes the GEMM in float16 and casts back: faster on some hardware, and outside the contract.

Class: precision downgrade
Problem: linear_gelu
Expect: wrong_output/tolerance
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = x.half().float() @ self.linear.weight.half().float().t() + self.linear.bias
        return torch.nn.functional.gelu(y)
