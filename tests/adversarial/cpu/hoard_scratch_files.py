"""Fills its scratch directory (a tmpfs: memory, not disk) with files of 192 MiB, each under the
file size limit, 1.5 GiB in all while loading: the memory outlives every process that wrote it, so
killing the writer frees none of it; only a cap on the jail's group charges it to the candidate.

Class: blame and crashes
Problem: scaled_add
Expect: runtime_error/resource | load_error/*
"""

import os
import tempfile

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        chunk = b"\2" * (1 << 20)
        for i in range(8):
            with open(os.path.join(tempfile.gettempdir(), f"hoard{i}"), "wb") as fh:
                for _ in range(192):
                    fh.write(chunk)

    def forward(self, a, b):
        return torch.relu(a * self.scale + b)
