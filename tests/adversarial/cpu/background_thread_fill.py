"""Returns an empty tensor at once and fills it from a background thread a moment later.

Class: timed calls do no work
Problem: scaled_add
Expect: wrong_output/*
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
        import threading, time

        out = torch.empty_like(a)

        def fill():
            time.sleep(0.0005)
            out.copy_(reference_math(a, b, self.scale))

        threading.Thread(target=fill, daemon=True).start()
        return out
