"""Problem: relu(a * scale + b) on a 512 x 512 block whose inputs come from NumPy's global generator.

Every process of the evaluator starts with the generator state of the zygote that forked it, which
imports NumPy's random module once for all of them: a problem written with NumPy draws from it."""

import numpy as np
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a * self.scale + b)


def get_inputs():
    return [torch.from_numpy(np.random.standard_normal((512, 512)).astype(np.float32)) for _ in range(2)]


def get_init_inputs():
    return [0.5]
