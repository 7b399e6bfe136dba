"""An honest candidate more accurate than its reference: two-pass variance accumulated in float64.

Class: honest control (precision contract)
Problem: row_variance
Expect: passed
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        d = x.double()
        return ((d - d.mean(-1, keepdim=True)) ** 2).mean(-1).float()
