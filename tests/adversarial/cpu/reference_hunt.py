"""Looks for the reference Model (modules, files the worker might hold); must find nothing.

Class: secrets readable
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
        import os, sys, glob, types

        for module in list(sys.modules.values()):
            names = vars(module) if isinstance(module, types.ModuleType) else {}
            if "Mo" + "del" in names and "get_init_inputs" in names:
                raise RuntimeError(f"the reference module is loaded here: {module.__name__}")
        for pattern in ("/tmp/*/problem.py", "/tmp/stark-*/**/problem*.py", "/tmp/job/problem.py"):
            if glob.glob(pattern, recursive=True):
                raise RuntimeError(f"a problem file is readable: {glob.glob(pattern, recursive=True)[:2]}")

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
