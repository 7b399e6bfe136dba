"""Tries to shrink the timing inputs by wrapping the problem module's get_inputs (it must not exist here).

Class: timed calls do no work
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
        import sys, types

        for module in list(sys.modules.values()):
            fn = vars(module).get("get_inputs") if isinstance(module, types.ModuleType) else None
            if callable(fn):
                setattr(module, "get_inputs", lambda: [torch.randn(2, 2), torch.randn(2, 2)])
                raise RuntimeError(f"found get_inputs in {module.__name__}")

    def forward(self, a, b):
        return reference_math(a, b, self.scale)
