"""Returns a torch.Tensor subclass that would compute only when someone looks at it.

Class: timed calls do no work
Problem: scaled_add
Expect: rejected/tensor_subclass
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
        class Lazy(torch.Tensor):
            pass

        return torch.Tensor._make_subclass(Lazy, torch.empty_like(a))
