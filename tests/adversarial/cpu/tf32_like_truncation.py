"""Truncates the GEMM's operands to TF32's 10-bit mantissa, as tensor cores would.

Class: precision downgrade
Problem: linear_gelu
Expect: wrong_output/tolerance
"""

import torch
import torch.nn as nn


def tf32(t):
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.nn.functional.gelu(tf32(x) @ tf32(self.linear.weight).t() + self.linear.bias)
