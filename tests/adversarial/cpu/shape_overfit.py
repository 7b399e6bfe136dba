"""Shape-overfitted candidate for problem_two_shapes.py: expected verdict wrong_output on the second shape."""

import torch
from torch import nn

COLS = 64  # the width of the benchmark's first shape, hard-coded


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Right shape, right values on the first 64 columns; columns past them are left zero.
        out = torch.zeros_like(x)
        out[:, :COLS] = torch.relu(x[:, :COLS]) * 2.0
        return out
