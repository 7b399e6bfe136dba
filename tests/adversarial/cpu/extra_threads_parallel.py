"""Splits the work over four threads to beat a one-thread budget (CPU time is what is charged).

Class: resources beyond the budget
Problem: scaled_add
Expect: passed<=1.35
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        from concurrent.futures import ThreadPoolExecutor

        out = torch.empty_like(a)
        rows = a.shape[0] // 4

        def part(i):
            s = slice(i * rows, (i + 1) * rows)
            out[s].copy_(reference_math(a[s], b[s], self.scale))

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(part, range(4)))
        return out
