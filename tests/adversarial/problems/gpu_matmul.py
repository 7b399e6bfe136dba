"""GPU problem: an fp32 matrix product, 2048 x 4096 by 4096 x 2048 (compute-bound, TF32 off)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(2048, 4096), torch.randn(4096, 2048)]


def get_init_inputs():
    return []
