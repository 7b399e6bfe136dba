"""Poison sensing: keeps one output buffer and computes only when its prior contents are not what it
wrote last (NaN or 0xFF, as a harness that poisons outputs before its checked calls would leave
them); otherwise it hands the buffer back untouched, betting the call is a timed one.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.buf = None
        self.mark = None

    def forward(self, a, b):
        if self.buf is None:
            self.buf = torch.full_like(a, float("nan"))
        poisoned = bool(torch.isnan(self.buf[0, :16]).any()) or (
            self.mark is not None and not torch.equal(self.buf[0, :16], self.mark)
        )
        if poisoned:
            torch.add(b, a, alpha=self.scale, out=self.buf).relu_()
            self.mark = self.buf[0, :16].clone()
        return self.buf
