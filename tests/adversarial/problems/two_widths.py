"""Problem: 2 * relu(x) over rows of two widths (SHAPES), the one shape_overfit.py is tuned against."""

import torch
from torch import nn

SHAPES = [{"rows": 8, "cols": 64}, {"rows": 8, "cols": 128}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


def get_inputs(rows: int = 8, cols: int = 64) -> list[torch.Tensor]:
    return [torch.randn(rows, cols)]


def get_init_inputs() -> list:
    return []
