"""GPU problem: relu(x + y) over 64K fp32 elements (launch-bound: a few microseconds on an H100; its
output fits in the L2, so the output-write floor is zero)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(256, 256), torch.randn(256, 256)]


def get_init_inputs():
    return []
