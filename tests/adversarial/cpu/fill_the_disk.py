"""Writes a 10 GB file into its scratch directory; the sandbox caps it and the host disk is untouched.

Class: blame and crashes
Problem: scaled_add
Expect: passed<=1.35 | runtime_error/*
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        import os

        chunk = b"\0" * (64 << 20)
        try:
            with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "big.bin"), "wb") as fh:
                for _ in range(160):
                    fh.write(chunk)
        except OSError:
            pass

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
