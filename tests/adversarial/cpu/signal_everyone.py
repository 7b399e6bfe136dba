"""Sends SIGKILL to every process it may signal, hoping to take the judge or the baseline down.

Class: the judge is patchable
Problem: scaled_add
Expect: runtime_error/*
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


def _find_runner():
    import gc

    gc.unfreeze()  # the harness froze its objects out of sight: an attacker thaws them first
    for obj in gc.get_objects():
        if type(obj).__name__ == "Runner" and hasattr(obj, "side") and hasattr(obj, "call"):
            return obj
    return None


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        import os, signal

        os.kill(-1, signal.SIGKILL)
        return reference_math(a, b, self.scale)
