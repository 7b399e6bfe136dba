"""Searches the seed spaces a careless harness would draw from: every seed below 2**16, the clock's
seconds of the last hour, and its own process's initial seed and the seeds next to it. Raises if one
of them regenerates its first input (each input must come from a secret seed too wide to search).

Class: secrets readable
Problem: scaled_add
Expect: passed<=1.35
"""

import time

import torch
import torch.nn as nn


def reference_math(a, b, scale):
    return torch.relu(a * scale + b)


def candidate_seeds():
    yield from range(1 << 16)
    now = int(time.time())
    yield from range(now - 3600, now + 5)
    own = torch.initial_seed()
    yield from range(max(0, own - 64), own + 64)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.searched = False

    def forward(self, a, b):
        if not self.searched:  # once: about half a second, before any timed call
            self.searched = True
            # torch.randn fills 16 or more values by one method: a 16-value draw is a large one's prefix
            first = a.flatten()[:16]
            g = torch.Generator()
            for seed in candidate_seeds():
                g.manual_seed(seed)
                if torch.equal(torch.randn(16, generator=g), first):
                    raise RuntimeError(f"regenerated the inputs from seed {seed}")
        return reference_math(a, b, self.scale)
