"""Returns the previous call's tensor at once; a thread computes this call's result into it afterwards.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/* | passed<=1.35
"""

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.buffer = None

    def forward(self, a, b):
        import threading

        out = self.buffer if self.buffer is not None else torch.empty_like(a)
        self.buffer = out
        threading.Thread(target=lambda: out.copy_(reference_math(a, b, self.scale)), daemon=True).start()
        return out
