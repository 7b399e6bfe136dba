"""Tuned for the benchmark's first shape: its width is hard-coded, so columns past it stay zero.

Correct on the first input set (rows=8,cols=64), wrong on the second (cols=128): a problem that
declares both must fail it, whichever set the timing uses.

Class: partial computation
Problem: two_widths
Expect: wrong_output/tolerance
"""

import torch
from torch import nn

COLS = 64  # the width of the problem's first shape, hard-coded


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Right shape, right values on the first 64 columns; columns past them are left zero.
        out = torch.zeros_like(x)
        out[:, :COLS] = torch.relu(x[:, :COLS]) * 2.0
        return out
