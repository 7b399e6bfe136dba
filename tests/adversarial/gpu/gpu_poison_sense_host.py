"""Poison sensing from the host: looks at its freshly allocated output before computing and runs the
product only when the buffer holds NaN (the harness's 0xFF fill); otherwise it returns the buffer
as it found it, whatever an earlier call left there.

Class: timed calls do no work
Problem: gpu_matmul
Expect: wrong_output/*
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        if bool(torch.isnan(out[0, :8]).all()):
            torch.mm(a, b, out=out)
        return out
