"""Forks hundreds of children (or until the limits stop it), leaving them sleeping.

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
        import os, time

        for _ in range(400):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                with open("/proc/self/comm", "w") as fh:
                    fh.write("adv-leftover")
                time.sleep(600)
                os._exit(0)

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
